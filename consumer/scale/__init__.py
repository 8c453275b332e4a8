"""Scale-out: the heavy passes of a build and a pack run on an engine (Dask distributed, or any executor).

- :mod:`~consumer.scale.engines` — the executor seam (:class:`Engine`, :class:`DaskEngine`,
  :class:`ExecutorEngine`, :func:`resolve_engine`) and the task sizing rule (:func:`plan_tasks`); the one
  module that imports dask;
- :mod:`~consumer.scale.tasks` — what a worker runs (stat, probe, libmagic, content of a run of files);
- :mod:`~consumer.scale.scan` — the build's passes on an engine, results in corpus order for the catalog;
- :mod:`~consumer.scale.parts` — part files: the columns a worker writes into the cache directory (``.npy``,
  CRC-32C and stamps, atomic rename) and the client maps; :mod:`~consumer.scale.part_tasks` — the walk and libmagic
  tasks that write them (a cluster build of a folder: :mod:`consumer.dataset.on_parts`);
- :mod:`~consumer.scale.pack` — a pack whose tokens are read and written by the workers in parts;
- :mod:`~consumer.scale.parquet` — the catalog as partitioned Parquet (one file per task, a manifest).

It sits above :mod:`consumer.packed` (a distributed pack ends in its commit) and below
:mod:`consumer.dataset` (the build calls it). See ``docs/scale-out.md``.
"""
