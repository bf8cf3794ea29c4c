"""Values made JSON-exact: free-form cells, timestamps and Arrow columns, as validation judges
them and the wire writes them (one rule for both, so what passes is what is sent)."""
