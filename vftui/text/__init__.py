"""What people (and programs reading --json) read: wording, printable text, redaction."""
