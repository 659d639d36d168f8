"""cuda_library: compiles .cu files with nvcc (sm_90 SASS + compute_90 PTX).

The targets exist only under --config=cuda: without it they are marked
incompatible, so `bazel build //...` skips them and never needs nvcc.
"""

NVCC = "/usr/local/cuda/bin/nvcc"

CUDA_ONLY = select({
    "//tools:cuda_enabled": [],
    "//conditions:default": ["//tools:incompatible"],
})

def _dedup(items):
    out = []
    for x in items:
        if x not in out:
            out.append(x)
    return out

def cuda_library(name, srcs = [], hdrs = [], deps = [], copts = [], linkopts = [],
                 nvcc_hdrs = [], visibility = None, **kwargs):
    """A cc_library whose .cu sources are compiled by nvcc.

    Args:
      name: library name.
      srcs: .cu files (and optionally .cc files, compiled by the C++ compiler).
      hdrs: headers of the library (visible to the .cu files too).
      deps: cc_library deps; their headers are visible to nvcc via -I. .
      copts: extra nvcc flags.
      nvcc_hdrs: header labels from other packages that the .cu files include
        (keep .cu files free of protobuf and glog headers: give them a plain
        C++ interface).
      linkopts: extra link options.
      visibility: visibility.
      **kwargs: passed to the cc_library.
    """
    cu = [s for s in srcs if s.endswith(".cu")]
    cc = [s for s in srcs if not s.endswith(".cu")]
    objs = []
    for s in cu:
        obj = name + "_" + s.replace("/", "_")[:-len(".cu")] + ".pic.o"
        native.genrule(
            name = name + "_" + s.replace("/", "_").replace(".", "_") + "_nvcc",
            srcs = _dedup([s] + hdrs + nvcc_hdrs + native.glob(["*.h", "*.cuh"], allow_empty = True)),
            outs = [obj],
            # nvcc names its intermediate files in $TMPDIR after its pid,
            # which is the same small number in every sandbox: two nvcc
            # actions at once then overwrite each other's .ptx ("ptxas
            # fatal: Input file ... could not be opened"). A fresh
            # directory per action keeps them apart.
            cmd = ("tmp=$$(mktemp -d) && TMPDIR=$$tmp " + NVCC + " -std=c++17 -O3 -Xcompiler -fPIC --expt-relaxed-constexpr " +
                   "-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 " +
                   "-I. -I$(GENDIR) -isystem /usr/local/cuda/include " + " ".join(copts) +
                   " -c $(location %s) -o $@; rc=$$?; rm -rf $$tmp; exit $$rc") % s,
            target_compatible_with = CUDA_ONLY,
            message = "nvcc " + s,
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = cc + objs,
        hdrs = hdrs,
        deps = deps + ["//third_party:cudart"],
        linkopts = linkopts,
        target_compatible_with = CUDA_ONLY,
        visibility = visibility,
        **kwargs
    )
