"""Validation: pandera imported once, the check registry, schema building blocks, column
rules, the ValidationReport, and the quarantine of invalid rows."""
