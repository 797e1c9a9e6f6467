# src/dl_pipeline.h: native transform chains (the ops themselves are the
# DL_OPS table of src/dl_tables.h, see _tables.pxd).
from libc.stddef cimport ptrdiff_t
from libc.stdint cimport uint64_t

from dataloader._core._typedefs cimport uint8_t
from dataloader._core.ops cimport dl_image_t


cdef extern from "dl_pipeline.h" nogil:
    ctypedef struct dl_op_t:
        int kind
        int i[6]
        double f[16]
    ctypedef struct dl_chain_input_t:
        const uint8_t* bytes
        size_t size
        dl_image_t image
        int layout
    ctypedef struct dl_chain_output_t:
        uint8_t* data
        ptrdiff_t row_stride
        int height, width, channels, sample_size, layout
    int DL_LAYOUT_HWC
    int DL_LAYOUT_CHW
    int dl_chain_run(const dl_op_t* ops, int n_ops, const dl_chain_input_t* input,
                     uint64_t seed, dl_chain_output_t* output, char* msg)
    int dl_chain_static_shape(const dl_op_t* ops, int n_ops, dl_chain_output_t* shape)
    ctypedef struct dl_lead_window_t:
        int top, left, height, width
        int out_height, out_width
        int filter
        uint64_t rest_seed
    int dl_chain_lead_window(const dl_op_t* ops, int n_ops, int height, int width, int channels,
                             uint64_t seed, dl_lead_window_t* window, char* msg)
    uint64_t dl_item_seed(uint64_t seed, uint64_t epoch, uint64_t index)
