// The token_window kernel's batches as .npy files, for token_windows_test.sh
// to compare with tools/bench/token_windows.py (the PyTorch twin's batches).
//
//   token_windows_golden OUT_DIR BATCH BLOCK TEXT_FILE...
//
// Prepares the corpus of the text files (data/char_tokenizer.h:
// OUT_DIR/tokens.npy, vocab.txt), then runs the CPU kernel (one device,
// the whole logical batch) for seeds 1 and -5 (an int64 attribute taken
// modulo 2^64), both splits and a few iterations, and writes each output
// as OUT_DIR/<split>_s<seed>_t<iteration>_{input,target}.npy (int32).
// Prints "ITERATIONS t1 t2 ..." for the script. Exit 1 on any error.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "oneflow_lite/data/char_tokenizer.h"
#include "oneflow_lite/data/npy.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/testing/op_runner.h"

namespace oflite {
namespace {

Status WriteBatches(const PreparedCorpus& corpus, const std::string& out_dir, int64_t batch,
                    int64_t block, const std::vector<int64_t>& iterations) {
  for (const int64_t seed : {int64_t{1}, int64_t{-5}}) {
    for (const std::string split : {"train", "test"}) {
      const OpConf op = OpConfBuilder("token_window", "text")
                            .Output("input")
                            .Output("target")
                            .Attr("path", corpus.tokens_path)
                            .Attr("split", split)
                            .Attr("batch_size", batch)
                            .Attr("block_size", block)
                            .Attr("vocab_size", corpus.vocab_size)
                            .Attr("seed", seed)
                            .Build();
      for (const int64_t t : iterations) {
        TensorMap env;
        RunOpOptions options;
        options.iteration = t;
        ASSIGN_OR_RETURN(TensorMap out, RunOp(op, &env, options));
        const std::string prefix =
            out_dir + "/" + split + "_s" + std::to_string(seed) + "_t" + std::to_string(t) + "_";
        for (const char* arg : {"input", "target"}) {
          const HostTensor& tensor = out.at(std::string("text/") + arg + "_0");
          RETURN_IF_ERROR(
              WriteNpy(prefix + arg + ".npy", DT_INT32, tensor.shape().dims(), tensor.raw()));
        }
      }
    }
  }
  return Status::OK();
}

int Main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: token_windows_golden OUT_DIR BATCH BLOCK TEXT_FILE...\n";
    return 2;
  }
  const std::string out_dir = argv[1];
  const int64_t batch = std::atoll(argv[2]);
  const int64_t block = std::atoll(argv[3]);
  const std::vector<std::string> files(argv + 4, argv + argc);
  StatusOr<PreparedCorpus> corpus = PrepareCorpus(files, out_dir);
  if (!corpus.ok()) {
    std::cerr << corpus.status() << "\n";
    return 1;
  }
  const std::vector<int64_t> iterations = {0, 1, 2, 17, 1000, 123456789};
  if (Status status = WriteBatches(*corpus, out_dir, batch, block, iterations); !status.ok()) {
    std::cerr << status << "\n";
    return 1;
  }
  std::cout << "ITERATIONS";
  for (int64_t t : iterations) std::cout << " " << t;
  std::cout << "\n";
  return 0;
}

}  // namespace
}  // namespace oflite

int main(int argc, char** argv) { return oflite::Main(argc, argv); }
