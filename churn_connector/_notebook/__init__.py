"""How reports and results look in Jupyter: compact HTML and matplotlib charts."""
