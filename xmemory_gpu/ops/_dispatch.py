"""Old import path of the ops contract, split into ``backends.py`` (probing, what each op implements,
resolution), ``devices.py`` (host/device transfer, tile tables) and ``checks.py`` (input checks, CSR).
"""

# transitional: retrieve/ and engine/ move to the public names next

from .backends import (  # noqa: F401
    BACKENDS,
    GPU_BACKENDS,
    HOST_BACKENDS,
    BackendStatus,
    available_backends,
    gpu_preference,
    interpreting_triton,
    is_available,
    resolve_backend,
)
from .checks import (  # noqa: F401
    LABEL_BOUND,
    check_budgets,
    check_finite,
    check_finite_scalar,
    check_float_matrix,
    check_index,
    check_int,
    check_k,
    check_labels,
    check_offsets,
    check_positive,
    check_real,
    check_same_segments,
    csr_offsets,
)
from .devices import (  # noqa: F401
    TileTable,
    array,
    as_caller,
    backend_device,
    encoder_device,
    gpu_device,
    host,
    is_cuda_tensor,
    is_torch,
    tile_table,
    to_backend,
)
