"""Network formulas: collectives over nodes and links, overlap with compute (pure, no engine)."""
