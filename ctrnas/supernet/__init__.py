"""Blocks, the NASRec weight-sharing supernet, and standalone subnet export."""
