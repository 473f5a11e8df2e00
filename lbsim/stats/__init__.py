"""Statistics shared by every front end: interval estimates that stay inside a quantity's range."""
