"""The environments a run can drive, behind one interface (``base.Environment``), and how they are found."""
