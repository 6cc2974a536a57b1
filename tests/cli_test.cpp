// The `luong` binary end to end: small runs on the built-in corpus, every subcommand, bad input,
// exact resumption and reproducible configs.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "luong/models/matrix_products.h"
#include "luong/models/panel_products.h"
#include "luong/models/state_dict.h"
#include "luong/util/atomic_file.h"
#include "luong/util/json.h"
#include "run_files.h"
#include "subprocess.h"
#include "test_paths.h"

namespace luong {
namespace {

namespace fs = std::filesystem;

struct CommandResult {
  int status = -1;
  std::string out;  // stdout and stderr together
};

// environment: "NAME=value ..." for this command alone.
CommandResult run(const std::string& args, const std::string& stdin_text = "", const std::string& environment = "",
                  const std::string& binary = LUONG_BINARY) {
  const fs::path dir = fs::temp_directory_path() / "luong_cli_test";
  fs::create_directories(dir);
  // One input file per call: ctest runs several of these tests at once.
  static int calls = 0;
  const std::string input = (dir / ("stdin." + std::to_string(::getpid()) + "." + std::to_string(calls++))).string();
  std::ofstream(input, std::ios::binary) << stdin_text;
  const std::string command =
      (environment.empty() ? "" : "env " + environment + " ") + binary + " " + args + " <" + input + " 2>&1";
  CommandResult r;
  FILE* pipe = ::popen(command.c_str(), "r");
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  fs::remove(input);
  return r;
}

using test::read_file;
using test::same_weights;

std::string temp_run(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "luong_cli_test" / name;
  luong::remove_tree(dir);
  return dir.string();
}

const std::string kSmall =
    "--data builtin:numbers --train-size 256 --dev-size 32 --test-size 32 --hidden 24 --embed 12 --batch 32 "
    "--threads 1 ";


// loss.csv without the timing column.
std::string loss_curve(const std::string& run_dir) {
  std::istringstream in(read_file(run_dir + "/loss.csv"));
  std::string line, out;
  while (std::getline(in, line)) out += line.substr(0, line.rfind(',')) + "\n";
  return out;
}

TEST(CliTest, UsageAndUnknownCommand) {
  EXPECT_EQ(run("").status, 2);
  const CommandResult unknown = run("frobnicate");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_EQ(std::count(unknown.out.begin(), unknown.out.end(), '\n'), 1) << unknown.out;
  EXPECT_NE(unknown.out.find("unknown command 'frobnicate'"), std::string::npos);
  EXPECT_NE(unknown.out.find("translate"), std::string::npos);
  const CommandResult help = run("train --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("--attention"), std::string::npos);
}

TEST(CliTest, BadInputIsOneLineAndExitTwo) {
  for (const std::string& args : {std::string("train --data /nonexistent.tsv --out ") + temp_run("bad1"),
                                  std::string("train --bogus-option"),
                                  std::string("train --data builtin:numbers --attention cosine --out ") + temp_run("bad2"),
                                  std::string("evaluate --model /nonexistent_run"),
                                  std::string("train --data ") + test::fixture("no_tab.tsv") + " --out " + temp_run("bad3")}) {
    const CommandResult r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << "\n" << r.out;
  }
  const CommandResult no_tab = run(std::string("train --data ") + test::fixture("no_tab.tsv") + " --out " + temp_run("bad4"));
  EXPECT_NE(no_tab.out.find("no_tab.tsv:2:"), std::string::npos) << no_tab.out;
}

// main ends with std::_Exit after flushing the output (LibTorch's static destructors skipped): output
// that could not be written fails the command with one line and exit 2, whether the executable wrote
// it (--help) or the LibTorch module too (--version).
TEST(CliTest, UnwritableStandardOutputFailsTheCommand) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  const std::string dir = temp_run("full");
  fs::create_directories(dir);
  for (const std::string args : {"--help", "--version"}) {
    test::Subprocess command(args, dir + "/stderr.log", {}, "/dev/null", "/dev/full");
    EXPECT_EQ(command.wait(), 2) << args << "\n" << command.output();
    EXPECT_EQ(command.output(), "luong " + args + ": stdout: write error (No space left on device)\n") << args;
  }
  // The same commands into a file write all of it.
  for (const std::string args : {"--help", "--version"}) {
    test::Subprocess command(args, dir + "/stderr.log", {}, "/dev/null", dir + "/stdout.txt");
    EXPECT_EQ(command.wait(), 0) << args << "\n" << command.output();
    const std::string out = read_file(dir + "/stdout.txt");
    EXPECT_NE(out.find(args == "--help" ? "gradcheck" : "threads:"), std::string::npos) << out;
  }
}

// LibTorch's CUDA libraries load with luong's CUDA module, for the commands that ask for a GPU only
// (util/cuda_libraries.h). The dynamic linker's log (LD_DEBUG=files) names every library it
// initialises: a CPU command's never names them, `--version`'s and a `--device cuda` command's do.
// There, with no GPU, the command stops at the device, and says so: had anything looked LibTorch's
// CUDA hooks up before the module loaded, it would say that instead.
TEST(CliTest, OnlyCommandsForAGpuLoadTheCudaLibraries) {
  const auto initialised = [](const std::string& log, const std::string& library) {
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("calling init: ") != std::string::npos && line.find(library) != std::string::npos) return true;
    }
    return false;
  };
  const auto end_of = [](const std::string& log) {
    return log.substr(log.size() - std::min<std::size_t>(log.size(), 2000));
  };
  const std::string dir = temp_run("cuda_libraries");
  const CommandResult train = run("train " + kSmall + "--epochs 1 --out " + dir, "", "LD_DEBUG=files");
  ASSERT_EQ(train.status, 0) << end_of(train.out);
  ASSERT_TRUE(initialised(train.out, "libtorch_cpu.so")) << "no dynamic linker's log";
  EXPECT_FALSE(initialised(train.out, "libtorch_cuda.so"));
  EXPECT_FALSE(initialised(train.out, "libluong_cuda.so"));
  const CommandResult translate = run("translate --model " + dir, "one two\n", "LD_DEBUG=files");
  ASSERT_EQ(translate.status, 0);
  EXPECT_FALSE(initialised(translate.out, "libtorch_cuda.so"));

  const CommandResult version = run("--version", "", "LD_DEBUG=files");
  ASSERT_EQ(version.status, 0);
#ifdef LUONG_WITH_CUDA_MODULE
  EXPECT_TRUE(initialised(version.out, "libluong_cuda.so"));
  EXPECT_TRUE(initialised(version.out, "libtorch_cuda.so"));
  EXPECT_NE(version.out.find("\nCUDA: runtime "), std::string::npos) << end_of(version.out);
  if (torch::cuda::is_available()) return;  // the CUDA tests train on the GPU
  for (const std::string& command :
       {"train " + kSmall + "--epochs 1 --out " + dir + "_gpu", "translate --model " + dir}) {
    const CommandResult gpu = run(command + " --device cuda", "one two\n", "LD_DEBUG=files");
    EXPECT_EQ(gpu.status, 2) << command;
    EXPECT_TRUE(initialised(gpu.out, "libtorch_cuda.so")) << command;
    EXPECT_NE(gpu.out.find("--device cuda: no CUDA device is visible\n"), std::string::npos)
        << command << "\n" << end_of(gpu.out);
  }
#else
  EXPECT_NE(version.out.find("\nCUDA: not available (this build of luong has no CUDA"), std::string::npos);
#endif
}

#ifdef LUONG_WITH_CUDA_MODULE
// A CUDA module that cannot load (not where it is looked for, or not a library) leaves the CPU
// commands alone and stops a GPU command with one line naming every place it looked.
TEST(CliTest, ACudaModuleThatCannotLoadStopsOnlyGpuCommands) {
  const std::string dir = temp_run("no_cuda_module");
  fs::create_directories(dir);
  fs::copy_file(LUONG_BINARY, dir + "/luong");  // with neither module beside it
  std::ofstream(dir + "/not_a_library.so") << "not ELF\n";
  const std::string environment = "LUONG_COMMANDS_MODULE=" + (fs::path(LUONG_BINARY).parent_path() /
                                                              "libluong_commands.so").string() +
                                  " LUONG_CUDA_MODULE=" + dir + "/not_a_library.so";
  const auto luong = [&](const std::string& args) { return run(args, "", environment, dir + "/luong"); };
  const std::string cannot_load = "cannot load libluong_cuda.so; tried " + dir + "/not_a_library.so (";
  const CommandResult version = luong("--version");
  EXPECT_EQ(version.status, 0) << version.out;
  EXPECT_NE(version.out.find("\nCUDA: not available (" + cannot_load), std::string::npos) << version.out;
  const CommandResult cpu = luong("train " + kSmall + "--epochs 1 --out " + dir + "/cpu");
  EXPECT_EQ(cpu.status, 0) << cpu.out;
  const CommandResult gpu = luong("train " + kSmall + "--epochs 1 --device cuda --out " + dir + "/gpu");
  EXPECT_EQ(gpu.status, 2) << gpu.out;
  EXPECT_EQ(gpu.out.rfind("luong train: --device cuda: " + cannot_load, 0), 0u) << gpu.out;
  EXPECT_EQ(std::count(gpu.out.begin(), gpu.out.end(), '\n'), 1) << gpu.out;
  EXPECT_NE(gpu.out.find(" " + dir + "/libluong_cuda.so "), std::string::npos) << gpu.out;  // beside the executable
}
#endif

// `luong version` says which kernels multiply the fused kernels' float32 matrices as the runtime
// flags select them, and a bad value of one ends a command before it starts: one line and exit 2.
TEST(CliTest, VersionSaysWhichProductKernelsRun) {
  const models::PanelIsa isa = models::panel_isa_here();
  const std::string panels = isa == models::PanelIsa::kNone     ? "as above (no panel kernel for this processor)"
                             : isa == models::PanelIsa::kAvx512 ? "panels, AVX-512"
                                                                : "panels, AVX2";
  const CommandResult on = run("version --panel-products on");
  EXPECT_EQ(on.status, 0) << on.out;
  EXPECT_NE(on.out.find("fused kernels' float32 products: "), std::string::npos) << on.out;
  const models::Bf16PanelKernel bf16_kernel = models::bf16_panel_kernel_here();
  const std::string bf16 = bf16_kernel == models::Bf16PanelKernel::kNone
                               ? ""
                               : std::string("; in bf16, bf16 panels (") + models::bf16_panel_kernel_name(bf16_kernel) + ")";
  EXPECT_NE(on.out.find("their per-step float32 products: " + panels + bf16 + "\n"), std::string::npos) << on.out;
  if (bf16_kernel == models::Bf16PanelKernel::kAmx) {
    const CommandResult no_amx = run("version --panel-products no-amx");
    EXPECT_NE(no_amx.out.find("; in bf16, bf16 panels (AVX512-BF16, --panel-products no-amx)\n"), std::string::npos)
        << no_amx.out;
  }
  if (isa != models::PanelIsa::kNone) {
    const CommandResult off = run("version --panel-products off");
    EXPECT_NE(off.out.find("their per-step float32 products: as above (--panel-products off)\n"),
              std::string::npos)
        << off.out;
  }
  const CommandResult mkl = run("version --float32-products mkl");
  EXPECT_NE(mkl.out.find("fused kernels' float32 products: MKL (--float32-products mkl)\n"), std::string::npos) << mkl.out;
  for (const auto& [flag, error] :
       {std::pair<std::string, std::string>{"--panel-products sometimes",
                                            "--panel-products: 'sometimes' is not one of on, off or no-amx"},
        {"--no-step-teams=2", "--no-step-teams: '2' is not a valid value"},
        {"--float32-products blas", "--float32-products: 'blas' is not one of auto, mkl or onednn"}}) {
    const std::string dir = temp_run("bad_switch");
    const CommandResult bad = run("train --data builtin:numbers " + flag + " --out " + dir);
    EXPECT_EQ(bad.status, 2) << bad.out;
    EXPECT_FALSE(fs::exists(dir)) << "a run started with " << flag;
    EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << bad.out;
    EXPECT_NE(bad.out.find(error), std::string::npos) << bad.out;
  }
}

TEST(CliTest, TrainEvaluateTranslateTrace) {
  const std::string dir = temp_run("full");
  const CommandResult train = run("train " + kSmall + "--epochs 2 --attention local-p --out " + dir);
  ASSERT_EQ(train.status, 0) << train.out;
  for (const char* file : {"model.pt", "best_model.pt", "config.json", "source.vocab", "target.vocab", "loss.csv",
                           "loss.png", "test.tsv", "checkpoint/optimizer.pt", "checkpoint/state.json"}) {
    EXPECT_TRUE(fs::exists(dir + "/" + file)) << file;
  }
  EXPECT_NE(train.out.find("epoch 2/2"), std::string::npos);

  const CommandResult evaluate = run("evaluate --threads 1 --model " + dir);
  ASSERT_EQ(evaluate.status, 0) << evaluate.out;
  const Json json = Json::parse(evaluate.out.substr(0, evaluate.out.find('\n')));
  EXPECT_EQ(json.at("sentences").get<int>(), 32);
  EXPECT_GT(json.at("perplexity").get<double>(), 1.0);
  EXPECT_GE(json.at("bleu").get<double>(), 0.0);

  // Empty lines, invalid UTF-8 and unknown scripts: one output line per input line, exit 0.
  const CommandResult translate = run("translate --threads 1 --model " + dir, "one hundred\n\n\xff\xfe\nالسلام\nseven\n");
  ASSERT_EQ(translate.status, 0) << translate.out;
  EXPECT_EQ(std::count(translate.out.begin(), translate.out.end(), '\n'), 5) << translate.out;
  const CommandResult beam = run("translate --threads 1 --beam 4 --model " + dir, "twelve\n");
  EXPECT_EQ(beam.status, 0) << beam.out;
  // The translator batches sentences by length; the output keeps the input order, and each
  // translation is the one the sentence gets alone.
  const std::vector<std::string> lines = {"three hundred forty-two", "seven", "one thousand two hundred five",
                                          "nineteen", "five hundred", "two"};
  std::string all, one_by_one;
  for (const auto& line : lines) {
    all += line + "\n";
    one_by_one += run("translate --threads 1 --model " + dir, line + "\n").out;
  }
  EXPECT_EQ(run("translate --threads 1 --batch 2 --model " + dir, all).out, one_by_one);
  const CommandResult stats = run("translate --threads 1 --stats --model " + dir, all);
  EXPECT_NE(stats.out.find("luong translate: 6 sentences in "), std::string::npos) << stats.out;

  const std::string png = dir + "/trace.png";
  const std::string csv = dir + "/trace.csv";
  const CommandResult trace = run("trace --threads 1 --model " + dir + " --sentence \"three hundred\" --heatmap " + png + " --csv " + csv);
  ASSERT_EQ(trace.status, 0) << trace.out;
  EXPECT_NE(trace.out.find("step 0: produced"), std::string::npos);
  EXPECT_NE(trace.out.find("<== peak"), std::string::npos);
  EXPECT_EQ(read_file(png).substr(1, 3), "PNG");
  EXPECT_EQ(read_file(csv).substr(0, 6), "q,k,w\n");
}

// --profile-steps: the table of the training thread's operations (the fused kernels' forward passes
// and backward nodes among them) after the warm-up steps, and the same steps as a Chrome trace.
TEST(CliTest, ProfileStepsPrintsWhereTheTimeGoesAndWritesTheTrace) {
  const std::string dir = temp_run("profile");
  const CommandResult train = run("train " + kSmall + "--epochs 2 --profile-steps 3 --out " + dir);
  ASSERT_EQ(train.status, 0) << train.out;
  EXPECT_EQ(train.out.find("ERROR"), std::string::npos) << train.out;
  const std::size_t table = train.out.find("profile: 3 steps, ");
  ASSERT_NE(table, std::string::npos) << train.out;
  EXPECT_EQ(train.out.find("profile: ", table + 1), train.out.find("profile: the Chrome trace")) << "one table";
  for (const char* operation : {"luong::RecurrentLayerFunction::forward", "backward: RecurrentLayerFunction",
                                "luong::LuongTeacherForcedFunction::forward", "backward: LuongTeacherForcedFunction"}) {
    EXPECT_NE(train.out.find(operation, table), std::string::npos) << operation << "\n" << train.out;
  }
  const Json trace = Json::parse(read_file(dir + "/profile.json"));
  int kernel_forwards = 0, optimizer_steps = 0;
  for (const Json& event : trace.at("traceEvents")) {
    if (!event.contains("name")) continue;
    kernel_forwards += event.at("name") == "luong::LuongTeacherForcedFunction::forward";
    optimizer_steps += event.at("name") == "luong::FusedAdam::fused_step";
  }
  EXPECT_EQ(kernel_forwards, 3);
  EXPECT_EQ(optimizer_steps, 3);
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

TEST(CliTest, ResumeGivesTheParametersOfAnUninterruptedRun) {
  const std::string straight = temp_run("straight");
  const std::string halves = temp_run("halves");
  ASSERT_EQ(run("train " + kSmall + "--epochs 2 --out " + straight).status, 0);
  ASSERT_EQ(run("train " + kSmall + "--epochs 1 --out " + halves).status, 0);
  const CommandResult again = run("train " + kSmall + "--epochs 1 --out " + halves);
  EXPECT_EQ(again.status, 2);  // refuses to overwrite a run
  const CommandResult resumed = run("train --resume --epochs 2 --threads 1 --out " + halves);
  ASSERT_EQ(resumed.status, 0) << resumed.out;
  EXPECT_TRUE(same_weights(straight + "/model.pt", halves + "/model.pt"));
  EXPECT_EQ(loss_curve(straight), loss_curve(halves));
}

// Trains `args` straight through and again with a SIGINT after the first checkpoint, then resumes the
// interrupted run; returns the interrupted run's state.json as the signal left it.
Json interrupt_and_resume(const std::string& name, const std::string& args, int epochs) {
  const std::string straight = temp_run(name + "_straight");
  const std::string interrupted = temp_run(name + "_interrupted");
  const std::string train = "train " + args + "--epochs " + std::to_string(epochs) + " --dev-size 0 --out ";
  EXPECT_EQ(run(train + straight).status, 0);

  test::Subprocess training(train + interrupted, interrupted + ".log");
  for (int i = 0; i < 3000 && !fs::exists(interrupted + "/checkpoint/state.json"); ++i) ::usleep(10000);
  training.signal(SIGINT);
  EXPECT_EQ(training.wait(), 130) << "the run ended before the signal arrived\n" << training.output();
  const Json state = Json::parse(read_file(interrupted + "/checkpoint/state.json"));
  EXPECT_LT(state.at("epoch").get<int>(), epochs);

  const CommandResult resumed = run("train --resume --threads 1 --out " + interrupted);
  EXPECT_EQ(resumed.status, 0) << resumed.out;
  EXPECT_TRUE(same_weights(straight + "/model.pt", interrupted + "/model.pt"));
  EXPECT_EQ(loss_curve(straight), loss_curve(interrupted));
  return state;
}

TEST(CliTest, SigintSavesMidEpochAndResumeMatchesAnUninterruptedRun) {
  interrupt_and_resume("sigint", kSmall, 40);
}

// With one batch an epoch, every SIGINT comes with an epoch's last batch: the epoch ends as usual
// (its checkpoint resumes at the next epoch) instead of saving an epoch with no batch left to run.
TEST(CliTest, SigintOnAnEpochsLastBatchEndsTheEpoch) {
  const Json state = interrupt_and_resume("sigint_last_batch", kSmall + "--batch 256 ", 60);
  EXPECT_EQ(state.at("batches_done").get<int>(), 0);
  EXPECT_GE(state.at("epoch").get<int>(), 1);
}

TEST(CliTest, ConfigReRunsAnExperimentBitForBit) {
  const std::string first = temp_run("config_a");
  const std::string second = temp_run("config_b");
  ASSERT_EQ(run("train " + kSmall + "--epochs 2 --attention general --decoder bahdanau --out " + first).status, 0);
  const CommandResult rerun = run("train --config " + first + "/config.json --threads 1 --out " + second);
  ASSERT_EQ(rerun.status, 0) << rerun.out;
  EXPECT_EQ(loss_curve(first), loss_curve(second));
  EXPECT_TRUE(same_weights(first + "/model.pt", second + "/model.pt"));
  const Json config = Json::parse(read_file(second + "/config.json"));
  EXPECT_EQ(config.at("decoder").get<std::string>(), "bahdanau");
}

TEST(CliTest, ExportedModelLoadsInPython) {
  ASSERT_EQ(std::system((test::python() + " -c 'import torch' >/dev/null 2>&1").c_str()), 0) << test::python() << " cannot import torch";
  const std::string dir = temp_run("python");
  ASSERT_EQ(run("train " + kSmall + "--epochs 1 --out " + dir).status, 0);
  const std::string command = test::python() + " -c \"import torch; d = torch.load('" + dir +
                              "/model.pt'); assert 'decoder.Wc.weight' in d and 'encoder.gru.weight_ih_l0' in d; "
                              "assert tuple(d['decoder.Wc.weight'].shape) == (24, 48)\"";
  EXPECT_EQ(std::system(command.c_str()), 0);
}

TEST(CliTest, ClozeAndGradcheck) {
  const std::string dir = temp_run("cloze");
  const CommandResult cloze = run("cloze --epochs 60 --out " + dir);
  ASSERT_EQ(cloze.status, 0) << cloze.out;
  EXPECT_NE(cloze.out.find("[B-tokens] 16 sentences, 98 distinct tokens"), std::string::npos);
  EXPECT_NE(cloze.out.find("[B-train] initial loss = 4.5846"), std::string::npos);
  EXPECT_NE(read_file(dir + "/attention_loss.csv").find("60.000000,0.658661"), std::string::npos);
  EXPECT_EQ(read_file(dir + "/attention_weights.csv").substr(0, 6), "q,k,w\n");
  EXPECT_TRUE(fs::exists(dir + "/attention.png"));
  const CommandResult gradcheck = run("gradcheck --sentences 5");
  EXPECT_EQ(gradcheck.status, 0) << gradcheck.out;
  EXPECT_NE(gradcheck.out.find(": ok"), std::string::npos);
  EXPECT_EQ(run("gradcheck --sentences 2 --tolerance 1e-300").status, 3);
  EXPECT_EQ(run("gradcheck --sentences 2 --tolerance 0").status, 2);
}

}  // namespace
}  // namespace luong
