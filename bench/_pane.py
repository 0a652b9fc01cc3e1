"""What the benches that drive the dashboard in tmux share."""

# tmux puts the COLUMNS/LINES of a client with no terminal (80x24) in a pane's environment, and
# Textual takes them over the pane's real size: a bench at 120x40 would draw at 80x24.
PANE_ENV = "env -u COLUMNS -u LINES"
