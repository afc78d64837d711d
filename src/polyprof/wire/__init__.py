"""Wire-level helpers: run-time protobuf schemas and vectorized decode kernels."""
