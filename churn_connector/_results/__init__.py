"""What a send leaves behind: the SendResult users read, and the result files."""
