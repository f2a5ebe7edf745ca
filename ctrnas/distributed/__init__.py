"""Scale-out: sharded embedding training (TorchRec DMP) on N ranks.

Training (every rank runs the same code; `torchrun --nproc_per_node N -m ctrnas train ... --distributed`):
  env = init_distributed()                        dmp.py: gloo on CPU, nccl on GPU, from torchrun's env vars
  trainer = DistributedTrainer(model, cfg, env, ShardingConfig("row_wise"|None=planner), out_dir)
  trainer.fit(global_train_batches, global_val)   trainer.py: equals the 1-process Trainer on the same batches
  state = gather_state_dict(trainer.model)        checkpoint.py: full tensors on rank 0 (export reads them)
  train_and_test_distributed(...)                 run.py: the `--distributed` path of `ctrnas train`
(`ctrnas run --distributed`, where rank 0 searches and all ranks train the final stage, is
`ctrnas.pipeline.distributed`: it drives the pipeline's stages, so it sits above this package.)
Pieces: data.py (rank slices of each global batch), reduce.py (collectives), launch.py (spawn N local
ranks without torchrun), testing.py (rank functions for tests and benchmarks).

Search scoring on worker processes or Ray is not here: a search takes `execution=` (`ctrnas.execution`, a
recipe's `execution:` section), and `ctrnas.search.parallel.Scorer` scores a list of candidates on it.
Import the submodules directly; this file stays import-light.
"""
