"""Network formulas: collectives over nodes and links, NCCL's all-reduce cost model, overlap with compute (pure, no engine)."""
