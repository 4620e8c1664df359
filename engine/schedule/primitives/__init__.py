"""Schedule primitives, one module per family. Importing this package registers them.

* :mod:`.queries` — get_block, get_loops, get_child_blocks, get_producers, get_consumers
* :mod:`.loops` — split, fuse, reorder
* :mod:`.annotations` — parallel, vectorize, unroll, annotate, unannotate
* :mod:`.bind` — bind (a loop as a GPU thread axis)
* :mod:`.compute_location` — compute_at, reverse_compute_at (their region inference in
  :mod:`.region_inference`, also used by the cache stages; the moved block's axes solved in
  :mod:`.var_domain`)
* :mod:`.inline` — compute_inline, reverse_compute_inline
* :mod:`.decompose` — decompose_reduction
* :mod:`.storage`, :mod:`.reduction`, :mod:`.layout` — cache_read/cache_write/set_scope/
  storage_align, rfactor, transform_layout (added by their own modules when present);
  :mod:`.storage` brings in :mod:`.cache` (cache_read/cache_write, with their copy stage
  in :mod:`.cache_stage`)
* :mod:`.pad_einsum`, :mod:`.decompose_padding` (and can_decompose_padding, a Schedule
  method that records nothing), :mod:`.reindex` (reindex, reindex_cache_read/write),
  :mod:`.cache_inplace`, :mod:`.cache_index`, :mod:`.rolling_buffer` — their new stages built by :mod:`.stages`
* :mod:`.blockize` — blockize; :mod:`.tensorize` — tensorize (its intrinsics in
  :mod:`engine.schedule.tensor_intrin`); :mod:`.partition` — loop_partition, merge;
  :mod:`.block_layout` — reorder_block_iter_var, transform_block_layout (its map's inverse
  in :mod:`.index_map_inverse`);
  :mod:`.buffer_access` — unsafe_set_dtype, annotate_buffer_access;
  :mod:`.read_write_at` — read_at, write_at (a copy made in every iteration of a loop)
* :mod:`.sampling` — sample_perfect_tile, sample_categorical, sample_compute_location
* helpers: :mod:`._common` (argument checks, small IR utilities), :mod:`.buffers` (buffer
  look-ups and access rewriting, for the storage, cache, reduction and layout modules)
"""
# Importing a family registers its primitives (see engine/schedule/registry.py).
from . import queries, loops  # noqa: F401
from . import (annotations, block_layout, blockize, buffer_access, cache_index,  # noqa: F401
               cache_inplace, compute_location, decompose, decompose_padding, inline, layout,
               pad_einsum, partition, reduction, reindex, rolling_buffer, sampling, storage,
               tensorize)
from . import fuse_epilogue  # noqa: F401  (fuse_reduction_epilogue)
from . import read_write_at  # noqa: F401  (read_at, write_at)
from . import bind  # noqa: F401  (bind: GPU thread axes)
