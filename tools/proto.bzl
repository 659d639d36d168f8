"""cc_proto: a .proto file -> a C++ library, using the system protoc.

Bazel 4's native proto rules would fetch protobuf from the network; this
macro runs Debian's /usr/bin/protoc in a genrule instead and links the
system libprotobuf (//third_party:protobuf).
"""

def cc_proto(name, srcs, deps = [], visibility = None):
    """Generates <name> (a cc_library) from .proto files in this package.

    Args:
      name: name of the cc_library.
      srcs: .proto files of this package.
      deps: other cc_proto targets whose .proto files are imported.
      visibility: visibility of the library.
    """
    pkg = native.package_name()
    hdrs = [s[:-len(".proto")] + ".pb.h" for s in srcs]
    ccs = [s[:-len(".proto")] + ".pb.cc" for s in srcs]
    native.filegroup(
        name = name + "_srcs",
        srcs = srcs + [d + "_srcs" for d in deps],
        visibility = visibility,
    )
    native.genrule(
        name = name + "_gen",
        srcs = srcs + [d + "_srcs" for d in deps],
        outs = hdrs + ccs,
        cmd = "/usr/bin/protoc -I. --cpp_out=$(GENDIR) " +
              " ".join(["%s/%s" % (pkg, s) for s in srcs]),
        message = "protoc %s" % name,
    )
    native.cc_library(
        name = name,
        srcs = ccs,
        hdrs = hdrs,
        deps = deps + ["//third_party:protobuf"],
        visibility = visibility,
    )
