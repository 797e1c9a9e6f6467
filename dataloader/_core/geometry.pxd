# src/dl_geometry.h: affine warps (Pillow's arithmetic) and the matrices of
# torchvision's rotate and affine, called by ops.pyx and by the chains.
from dataloader._core._typedefs cimport uint8_t
from dataloader._core.ops cimport dl_image_t


cdef extern from "dl_geometry.h" nogil:
    ctypedef struct dl_affine_params_t:
        double angle, translate_x, translate_y, scale, shear_x, shear_y, center_x, center_y
    void dl_affine_matrix(const dl_affine_params_t* params, double* matrix)
    void dl_rotation_matrix(double angle, double center_x, double center_y, int expand, int h,
                            int w, double* matrix, int* out_h, int* out_w)
    ctypedef struct dl_warp_t:
        double matrix[6]
        int filter
        uint8_t fill[4]
        int out_h, out_w
        int top, left
    int dl_affine(const dl_image_t* src, const dl_image_t* dst, const dl_warp_t* warp)
