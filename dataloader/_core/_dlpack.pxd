# The DLPack ABI (https://dmlc.github.io/dlpack/latest/c_api.html), the
# subset needed to export CPU tensors: the legacy DLManagedTensor and the
# versioned DLManagedTensorVersioned (DLPack 1.0).  The layouts are fixed by
# the specification; they are declared once, here.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from *:
    """
    #include <stdint.h>
    typedef struct { int32_t device_type; int32_t device_id; } dl_DLDevice;
    typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } dl_DLDataType;
    typedef struct {
        void *data;
        dl_DLDevice device;
        int32_t ndim;
        dl_DLDataType dtype;
        int64_t *shape;
        int64_t *strides;
        uint64_t byte_offset;
    } dl_DLTensor;
    typedef struct dl_DLManagedTensor {
        dl_DLTensor dl_tensor;
        void *manager_ctx;
        void (*deleter)(struct dl_DLManagedTensor *self);
    } dl_DLManagedTensor;
    typedef struct { uint32_t major; uint32_t minor; } dl_DLPackVersion;
    typedef struct dl_DLManagedTensorVersioned {
        dl_DLPackVersion version;
        void *manager_ctx;
        void (*deleter)(struct dl_DLManagedTensorVersioned *self);
        uint64_t flags;
        dl_DLTensor dl_tensor;
    } dl_DLManagedTensorVersioned;
    """
    ctypedef struct DLDevice "dl_DLDevice":
        int32_t device_type
        int32_t device_id
    ctypedef struct DLDataType "dl_DLDataType":
        uint8_t code
        uint8_t bits
        uint16_t lanes
    ctypedef struct DLTensor "dl_DLTensor":
        void* data
        DLDevice device
        int32_t ndim
        DLDataType dtype
        int64_t* shape
        int64_t* strides
        uint64_t byte_offset
    ctypedef struct DLManagedTensor "dl_DLManagedTensor":
        DLTensor dl_tensor
        void* manager_ctx
        void (*deleter)(DLManagedTensor*) noexcept nogil
    ctypedef struct DLPackVersion "dl_DLPackVersion":
        uint32_t major
        uint32_t minor
    ctypedef struct DLManagedTensorVersioned "dl_DLManagedTensorVersioned":
        DLPackVersion version
        void* manager_ctx
        void (*deleter)(DLManagedTensorVersioned*) noexcept nogil
        uint64_t flags
        DLTensor dl_tensor

cdef enum:
    DL_CPU = 1                     # kDLCPU
    DL_UINT = 1                    # kDLUInt
    DL_FLOAT = 2                   # kDLFloat
    DL_FLAG_IS_COPIED = 2          # DLPACK_FLAG_BITMASK_IS_COPIED
