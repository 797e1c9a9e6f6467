/* The named sets of the native code, each declared once as an X-macro
 * table. The C enums (dl_op_kind_t, dl_filter_t, dl_pad_mode_t,
 * dl_format_t, dl_status_t), the names the C messages print and the names
 * Python uses (the tuples of _core/pipeline.pyx, resize.pyx, ops.pyx and
 * codecs.pyx, through _tables.pxd) are all expanded from these rows, so a
 * row's position is its code everywhere and nothing has to agree by hand.
 *
 * Adding a native op: one DL_OPS row here, the op's functions its key names
 * (its shape rule, plan and run, next to its kernel), and the Transform class
 * that emits it; nothing else lists the ops. */
#ifndef DL_TABLES_H
#define DL_TABLES_H

/* Native ops of a transform chain:
 * X(ENUM, key, "Name", input, "integer parameters", "real parameters").
 * `key` is the Python name of the op (a Transform's _steps() emits it), and
 * names the op's functions in C: shape_<key> and plan_<key> (dl_plan.c),
 * run_<key> (dl_pipeline.c), which the passes call through tables expanded
 * from these rows. "Name" is the one messages use; `input` what the op
 * takes (DL_IN_ANY, DL_IN_HWC: uint8 or float32 HWC, DL_IN_HWC_UINT8). The
 * parameter lists name each slot of dl_op_t's i[] and f[] in order; "name*N"
 * takes N slots (a sequence, zero-padded). */
#define DL_OPS(X)                                                                           \
    X(DECODE, decode, "Decode", DL_IN_ANY, "channels max_width max_height exact",           \
      "max_bytes")                                                                          \
    X(CONVERT, convert, "Convert", DL_IN_HWC_UINT8, "channels", "")                         \
    X(CROP, crop, "Crop", DL_IN_HWC, "top left height width", "")                           \
    X(CENTER_CROP, center_crop, "CenterCrop", DL_IN_HWC, "height width", "")                \
    X(RANDOM_CROP, random_crop, "RandomCrop", DL_IN_HWC, "height width padding*4", "")      \
    X(RANDOM_RESIZED_CROP, random_resized_crop, "RandomResizedCrop", DL_IN_HWC_UINT8,       \
      "height width filter", "scale*2 ratio*2")                                             \
    X(PAD, pad, "Pad", DL_IN_HWC, "padding*4 mode", "fill*4")                               \
    X(PAD_TO, pad_to, "PadTo", DL_IN_HWC, "height width", "fill*4 anchor*2")                \
    X(RESIZE, resize, "Resize", DL_IN_HWC_UINT8, "height width max_size filter antialias",  \
      "")                                                                                   \
    X(FLIP, flip, "Flip", DL_IN_HWC, "horizontal", "")                                      \
    X(RANDOM_FLIP, random_flip, "RandomFlip", DL_IN_HWC, "horizontal", "p")                 \
    X(ROTATE90, rotate90, "Rotate90", DL_IN_HWC, "k", "")                                   \
    X(TO_FLOAT, to_float, "ToFloat", DL_IN_ANY, "", "")                                     \
    X(NORMALIZE, normalize, "Normalize", DL_IN_ANY, "channels", "mean*4 std*4")             \
    X(TO_CHW, to_chw, "ToChw", DL_IN_ANY, "", "")                                           \
    X(TO_HWC, to_hwc, "ToHwc", DL_IN_ANY, "", "")                                          \
    /* Colour and filter ops (dl_colour_chain.c); `active` of ColorJitter: bit 0    */       \
    /* brightness, 1 contrast, 2 saturation, 3 hue; `p`: the chance it applies.      */       \
    X(COLOR_JITTER, color_jitter, "ColorJitter", DL_IN_HWC_UINT8, "active",                  \
      "brightness*2 contrast*2 saturation*2 hue*2")                                          \
    X(GRAYSCALE, grayscale, "Grayscale", DL_IN_HWC_UINT8, "channels", "p")                  \
    X(GAUSSIAN_BLUR, gaussian_blur, "GaussianBlur", DL_IN_HWC_UINT8,                         \
      "kernel_width kernel_height", "sigma*2")                                               \
    X(POSTERIZE, posterize, "RandomPosterize", DL_IN_HWC_UINT8, "bits", "p")                \
    X(SOLARIZE, solarize, "RandomSolarize", DL_IN_HWC_UINT8, "", "threshold p")             \
    X(SHARPNESS, sharpness, "RandomAdjustSharpness", DL_IN_HWC_UINT8, "", "factor p")       \
    X(AUTOCONTRAST, autocontrast, "RandomAutocontrast", DL_IN_HWC_UINT8, "", "p")           \
    X(EQUALIZE, equalize, "RandomEqualize", DL_IN_HWC_UINT8, "", "p")                       \
    X(INVERT, invert, "RandomInvert", DL_IN_HWC_UINT8, "", "p")                            \
    X(RANDOM_ROTATION, random_rotation, "RandomRotation", DL_IN_HWC_UINT8,                  \
      "filter expand has_center", "degrees*2 center*2 fill*4")                              \
    X(RANDOM_AFFINE, random_affine, "RandomAffine", DL_IN_HWC_UINT8, "filter has_center",   \
      "degrees*2 translate*2 scale*2 shear*4 center*2 fill*4")                              \
    X(RANDOM_ERASING, random_erasing, "RandomErasing", DL_IN_ANY, "random values",          \
      "p scale*2 ratio*2 value*4")                                                          \
    /* Augmentation policies (dl_policy.c): sub-ops of DL_AUGMENT_OPS drawn per item. */    \
    /* `only` >= 0 (a test hook, not public): every sub-op is that one, of `value`. */      \
    X(RAND_AUGMENT, rand_augment, "RandAugment", DL_IN_HWC_UINT8,                           \
      "num_ops magnitude bins filter only", "fill*4 value")                                 \
    X(TRIVIAL_AUGMENT_WIDE, trivial_augment_wide, "TrivialAugmentWide", DL_IN_HWC_UINT8,    \
      "bins filter", "fill*4")                                                              \
    X(AUTO_AUGMENT, auto_augment, "AutoAugment", DL_IN_HWC_UINT8, "policy filter", "fill*4")

/* The sub-ops of the augmentation policies, in the order of torchvision's
 * _augmentation_space dicts (RandAugment and TrivialAugmentWide draw among
 * the first 14; AutoAugment's policies name all but Identity):
 * X(ENUM, "Name"). */
#define DL_AUGMENT_OPS(X)                                                                   \
    X(IDENTITY, "Identity") X(SHEAR_X, "ShearX") X(SHEAR_Y, "ShearY")                       \
    X(TRANSLATE_X, "TranslateX") X(TRANSLATE_Y, "TranslateY") X(ROTATE, "Rotate")           \
    X(BRIGHTNESS, "Brightness") X(COLOR, "Color") X(CONTRAST, "Contrast")                   \
    X(SHARPNESS, "Sharpness") X(POSTERIZE, "Posterize") X(SOLARIZE, "Solarize")             \
    X(AUTOCONTRAST, "AutoContrast") X(EQUALIZE, "Equalize") X(INVERT, "Invert")

/* AutoAugment's policies, as torchvision's AutoAugmentPolicy values: X(ENUM, "name"). */
#define DL_AUTO_POLICIES(X) X(IMAGENET, "imagenet") X(CIFAR10, "cifar10") X(SVHN, "svhn")

/* What an op takes: any image, an HWC image (uint8 or float32), a uint8 HWC image. */
enum { DL_IN_ANY = 0, DL_IN_HWC = 1, DL_IN_HWC_UINT8 = 2 };

/* Resampling filters (Pillow's): X(ENUM, "name"). */
#define DL_FILTERS(X) X(NEAREST, "nearest") X(BILINEAR, "bilinear") X(BICUBIC, "bicubic") \
    X(LANCZOS, "lanczos")

/* How a pad fills the border, as torchvision's Pad names it: X(ENUM, "name"). */
#define DL_PAD_MODES(X) X(CONSTANT, "constant") X(EDGE, "edge") X(REFLECT, "reflect") \
    X(SYMMETRIC, "symmetric")

/* Formats sniffed from leading bytes: X(ENUM, "name", native decoder). */
#define DL_FORMATS(X)                                                                      \
    X(UNKNOWN, "", 0) X(JPEG, "JPEG", 1) X(PNG, "PNG", 1) X(WEBP, "WEBP", 1) X(GIF, "GIF", 0) \
    X(BMP, "BMP", 0) X(TIFF, "TIFF", 0)

/* Pixel modes of a decode or a conversion, as Pillow names them:
 * X("name", channels). */
#define DL_MODES(X) X("L", 1) X("LA", 2) X("RGB", 3) X("RGBA", 4)

#define DL_ENUM_OP(name, key, display, input, ints, reals) DL_OP_##name,

typedef enum { DL_OPS(DL_ENUM_OP) DL_OP_COUNT } dl_op_kind_t;

#define DL_ENUM_FILTER(name, text) DL_FILTER_##name,
typedef enum { DL_FILTERS(DL_ENUM_FILTER) DL_FILTER_COUNT } dl_filter_t;
#undef DL_ENUM_FILTER

#define DL_ENUM_PAD(name, text) DL_PAD_##name,
typedef enum { DL_PAD_MODES(DL_ENUM_PAD) DL_PAD_COUNT } dl_pad_mode_t;
#undef DL_ENUM_PAD

#define DL_ENUM_FORMAT(name, text, native) DL_FMT_##name,
typedef enum { DL_FORMATS(DL_ENUM_FORMAT) DL_FMT_COUNT } dl_format_t;
#undef DL_ENUM_FORMAT

#define DL_COUNT_MODE(text, channels) +1
#define DL_MODE_COUNT (0 DL_MODES(DL_COUNT_MODE))

/* The rows as data, for messages and for Python. Out-of-range codes give
 * NULL (or 0), never an out-of-bounds read. */
typedef struct {
    const char *key, *name;
    int input;
    const char *ints, *reals;
} dl_op_row_t;

static inline const dl_op_row_t *dl_op_row(int kind)
{
#define DL_ROW_OP(name, key, display, input, ints, reals) {#key, display, input, ints, reals},
    static const dl_op_row_t rows[] = {DL_OPS(DL_ROW_OP)};
#undef DL_ROW_OP
    return kind >= 0 && kind < DL_OP_COUNT ? &rows[kind] : (const dl_op_row_t *)0;
}

static inline const char *dl_filter_name(int filter)
{
#define DL_ROW_NAME(name, text) text,
    static const char *const names[] = {DL_FILTERS(DL_ROW_NAME)};
    return filter >= 0 && filter < DL_FILTER_COUNT ? names[filter] : (const char *)0;
}

#define DL_ENUM_AUGMENT(name, text) DL_AUGMENT_##name,
typedef enum { DL_AUGMENT_OPS(DL_ENUM_AUGMENT) DL_AUGMENT_COUNT } dl_augment_op_t;
#undef DL_ENUM_AUGMENT

#define DL_ENUM_POLICY(name, text) DL_POLICY_##name,
typedef enum { DL_AUTO_POLICIES(DL_ENUM_POLICY) DL_POLICY_COUNT } dl_auto_policy_t;
#undef DL_ENUM_POLICY

static inline const char *dl_augment_op_name(int op)
{
    static const char *const names[] = {DL_AUGMENT_OPS(DL_ROW_NAME)};
    return op >= 0 && op < DL_AUGMENT_COUNT ? names[op] : (const char *)0;
}

static inline const char *dl_auto_policy_name(int policy)
{
    static const char *const names[] = {DL_AUTO_POLICIES(DL_ROW_NAME)};
    return policy >= 0 && policy < DL_POLICY_COUNT ? names[policy] : (const char *)0;
}

static inline const char *dl_pad_mode_name(int mode)
{
    static const char *const names[] = {DL_PAD_MODES(DL_ROW_NAME)};
#undef DL_ROW_NAME
    return mode >= 0 && mode < DL_PAD_COUNT ? names[mode] : (const char *)0;
}

static inline const char *dl_format_name(int format)
{
#define DL_ROW_FORMAT(name, text, native) text,
    static const char *const names[] = {DL_FORMATS(DL_ROW_FORMAT)};
#undef DL_ROW_FORMAT
    return format >= 0 && format < DL_FMT_COUNT ? names[format] : (const char *)0;
}

/* Whether `format` has a native decoder (else decoding falls back to Pillow). */
static inline int dl_format_is_native(int format)
{
#define DL_ROW_NATIVE(name, text, native) native,
    static const int natives[] = {DL_FORMATS(DL_ROW_NATIVE)};
#undef DL_ROW_NATIVE
    return format >= 0 && format < DL_FMT_COUNT && natives[format];
}

/* The i-th mode's name and channels (i in 0..DL_MODE_COUNT-1). */
static inline const char *dl_mode_name(int i)
{
#define DL_ROW_MODE_NAME(text, channels) text,
    static const char *const names[] = {DL_MODES(DL_ROW_MODE_NAME)};
#undef DL_ROW_MODE_NAME
    return i >= 0 && i < DL_MODE_COUNT ? names[i] : (const char *)0;
}

static inline int dl_mode_channels(int i)
{
#define DL_ROW_MODE_CHANNELS(text, channels) channels,
    static const int channels[] = {DL_MODES(DL_ROW_MODE_CHANNELS)};
#undef DL_ROW_MODE_CHANNELS
    return i >= 0 && i < DL_MODE_COUNT ? channels[i] : 0;
}

#undef DL_ENUM_OP

#endif
