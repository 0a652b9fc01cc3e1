"""``vftui report``: a run, an eval, a shard folder or a comparison as one self-contained HTML file."""
