"""Training engine: one trainer (Adagrad, cosine LR with linear warm-up, clipping, sparse embedding updates,
bit-identical resume), streaming log loss / AUC, hand-crafted baselines, and supernet warm-up."""
