"""Reference mirror worlds. Each world lives in a folder of its own."""
