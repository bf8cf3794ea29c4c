"""The delivery wing: ledger stage → requests → sender over a Poster → results."""
