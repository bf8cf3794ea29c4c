"""The shared ground: the words every stage speaks (row states, kinds, exit codes, notes),
the exceptions, the client's configuration, how things are spelled for people, and the row
book that gives every input row exactly one state."""
