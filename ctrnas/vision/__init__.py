"""NAS-Bench-201 on CIFAR: the cell space, the network, CIFAR readers, the proxy-correlation harness and
proxy-driven search. Plain torch (no torchvision). Submodules: space, network, cifar, warmup, stats,
correlate, search, commands (`ctrnas vision correlate|search`)."""
