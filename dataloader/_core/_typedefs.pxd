# The only typedef vocabulary of the native code: every .pyx cimports its
# sample and index types from here so that a kernel's signature says exactly
# which C type it reads and writes.
from libc.stdint cimport uint8_t, int64_t, uint16_t, uint64_t
ctypedef float float32_t
ctypedef double float64_t
ctypedef Py_ssize_t intp_t
