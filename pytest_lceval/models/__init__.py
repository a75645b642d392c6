"""Model backends behind one small interface; see base.Backend and registry."""
