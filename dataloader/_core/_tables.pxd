# src/dl_tables.h: the named sets of the native code (ops, filters, pad
# modes, formats, pixel modes, the policies' sub-ops), declared once as X-macro tables. Python's
# names for them are read from here (pipeline.OPS, resize.FILTERS,
# ops.PAD_MODES, codecs.FORMATS, codecs.MODES, pipeline.AUGMENT_OPS and
# pipeline.AUTO_AUGMENT_POLICIES), never retyped.


cdef extern from "dl_tables.h" nogil:
    int DL_OP_COUNT
    int DL_FILTER_COUNT
    int DL_PAD_COUNT
    int DL_FMT_COUNT
    int DL_MODE_COUNT
    int DL_AUGMENT_COUNT
    int DL_POLICY_COUNT
    ctypedef struct dl_op_row_t:
        const char* key
        const char* name
        int input
        const char* ints
        const char* reals
    const dl_op_row_t* dl_op_row(int kind)
    const char* dl_filter_name(int filter)
    const char* dl_pad_mode_name(int mode)
    const char* dl_format_name(int format)
    bint dl_format_is_native(int format)
    const char* dl_mode_name(int i)
    int dl_mode_channels(int i)
    const char* dl_augment_op_name(int op)
    const char* dl_auto_policy_name(int policy)
