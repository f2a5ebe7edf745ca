"""Data: raw readers, preprocessing to Parquet shards, synthetic generators, batch loaders."""
