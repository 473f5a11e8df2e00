"""Metrics: the records both engines emit, pure summarisers and atomic writers."""
