"""Native engine and kernels of ``dataloader`` (private: use the public modules)."""
