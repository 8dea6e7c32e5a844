# Fails when a server, client or test source includes <ATen/ATen.h>. That header declares
# every ATen operator and takes about as long to parse as the rest of a typical file (the
# files that dropped it compile in 27-32 % less time, docs/benchmarks.md "Narrow Torch
# includes"); sources include <ATen/core/Tensor.h> and the operators they call
# (<ATen/ops/NAME.h>, <ATen/TensorOperators.h> for +, -, * and comparisons) instead.
# The GPU device files (*_cuda.cc, built only against a CUDA LibTorch) and the op library
# (models/ops, built as a Torch extension) are not checked.
# Usage: cmake -DSOURCE_DIR=<repository root> -P narrow_torch_includes.cmake
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "SOURCE_DIR not set")
endif()
set(offenders "")
foreach(dir server client tests)
  file(GLOB_RECURSE sources "${SOURCE_DIR}/${dir}/*.h" "${SOURCE_DIR}/${dir}/*.cc")
  foreach(source IN LISTS sources)
    if(source MATCHES "_cuda\\.cc$")
      continue()
    endif()
    file(STRINGS "${source}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]ATen/ATen\\.h[>\"]")
    if(lines)
      file(RELATIVE_PATH relative "${SOURCE_DIR}" "${source}")
      list(APPEND offenders "${relative}")
    endif()
  endforeach()
endforeach()
if(offenders)
  list(JOIN offenders "\n  " listed)
  message(FATAL_ERROR "these include <ATen/ATen.h>; include <ATen/core/Tensor.h> and the "
                      "operators used (<ATen/ops/NAME.h>) instead:\n  ${listed}")
endif()
message(STATUS "no server, client or test source includes <ATen/ATen.h>")
