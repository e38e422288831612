// SPDX-License-Identifier: MIT
// The trainer's options table, YAML config, command-line overrides and --help.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "../common/error_text.hpp"
#include "core/error.hpp"
#include "options.hpp"

namespace fastmlip::trainer {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// A file of its own per test (ctest runs tests in parallel), removed at scope exit.
struct TempFile {
  std::string path;
  TempFile(const std::string& name, const std::string& text) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = ::testing::TempDir() + "fastmlip_options_" + info->name() + "_" + name;
    std::ofstream(path) << text;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

using test::error_of;

TEST(TrainerOptions, EveryOptionTheIssueNamesExists) {
  for (const char* name : {"train_file",
                           "valid_file",
                           "valid_fraction",
                           "test_file",
                           "energy_key",
                           "forces_key",
                           "stress_key",
                           "virials_key",
                           "r_max",
                           "num_channels",
                           "max_L",
                           "correlation",
                           "num_interactions",
                           "num_radial_basis",
                           "num_cutoff_basis",
                           "radial_MLP",
                           "E0s",
                           "energy_weight",
                           "forces_weight",
                           "stress_weight",
                           "lr",
                           "scheduler",
                           "ema",
                           "max_num_epochs",
                           "seed",
                           "default_dtype",
                           "batch_capacity",
                           "sampler",
                           "model",
                           "allow_missing",
                           "restart"}) {
    EXPECT_NE(find_option(name), nullptr) << name;
  }
}

TEST(TrainerOptions, TableIsWellFormed) {
  std::vector<std::string> names;
  for (const auto& s : option_table()) {
    EXPECT_FALSE(s.help.empty()) << s.name;
    EXPECT_FALSE(s.group.empty()) << s.name;
    for (const auto& n : names) {
      EXPECT_NE(n, s.name) << "listed twice";
    }
    names.push_back(s.name);
    if (s.type == OptionType::kChoice) {
      EXPECT_FALSE(s.choices.empty()) << s.name;
    }
  }
  // Every default converts (the constructor would throw otherwise) and required options have none.
  Options o;
  for (const auto& s : option_table()) {
    EXPECT_EQ(o.origin(s.name), "default");
    if (s.required) {
      EXPECT_FALSE(o.has(s.name)) << s.name;
    }
  }
}

TEST(TrainerOptions, DefaultsAreMaceTorchs) {
  // mace-torch 0.3.13 mace/tools/arg_parser.py (num_channels/max_L: the values check_args picks
  // when neither they nor hidden_irreps are given).
  const Options o;
  EXPECT_EQ(o.get_int("seed"), 123);
  EXPECT_EQ(o.get_float("r_max"), 5.0);
  EXPECT_EQ(o.get_int("num_radial_basis"), 8);
  EXPECT_EQ(o.get_int("num_cutoff_basis"), 5);
  EXPECT_EQ(o.get_int("max_ell"), 3);
  EXPECT_EQ(o.get_int("num_channels"), 128);
  EXPECT_EQ(o.get_int("max_L"), 1);
  EXPECT_EQ(o.get_int("correlation"), 3);
  EXPECT_EQ(o.get_int("num_interactions"), 2);
  EXPECT_EQ(o.get_int_list("radial_MLP"), (std::vector<long long>{64, 64, 64}));
  EXPECT_EQ(o.get_string("MLP_irreps"), "16x0e");
  EXPECT_EQ(o.get_string("energy_key"), "REF_energy");
  EXPECT_EQ(o.get_string("forces_key"), "REF_forces");
  EXPECT_EQ(o.get_string("stress_key"), "REF_stress");
  EXPECT_EQ(o.get_string("virials_key"), "REF_virials");
  EXPECT_EQ(o.get_float("valid_fraction"), 0.1);
  EXPECT_FALSE(o.has("valid_file"));
  EXPECT_FALSE(o.has("E0s"));
  EXPECT_EQ(o.get_string("scaling"), "rms_forces_scaling");
  EXPECT_EQ(o.get_float("avg_num_neighbors"), 1.0);
  EXPECT_TRUE(o.get_bool("compute_avg_num_neighbors"));
  EXPECT_EQ(o.get_string("loss"), "weighted");
  EXPECT_EQ(o.get_float("energy_weight"), 1.0);
  EXPECT_EQ(o.get_float("forces_weight"), 100.0);
  EXPECT_EQ(o.get_float("stress_weight"), 1.0);
  EXPECT_EQ(o.get_float("virials_weight"), 1.0);
  EXPECT_EQ(o.get_float("huber_delta"), 0.01);
  EXPECT_EQ(o.get_string("optimizer"), "adam");
  EXPECT_TRUE(o.get_bool("amsgrad"));
  EXPECT_EQ(o.get_float("lr"), 0.01);
  EXPECT_EQ(o.get_float("weight_decay"), 5e-7);
  EXPECT_EQ(o.get_float("clip_grad"), 10.0);
  EXPECT_EQ(o.get_string("scheduler"), "ReduceLROnPlateau");
  EXPECT_EQ(o.get_float("lr_factor"), 0.8);
  EXPECT_EQ(o.get_int("scheduler_patience"), 50);
  EXPECT_FALSE(o.get_bool("ema"));
  EXPECT_EQ(o.get_float("ema_decay"), 0.99);
  EXPECT_EQ(o.get_int("max_num_epochs"), 2048);
  EXPECT_EQ(o.get_int("patience"), 2048);
  EXPECT_EQ(o.get_string("default_dtype"), "float64");
  EXPECT_EQ(o.get_dict("config_type_weights"),
            (std::vector<std::pair<std::string, double>>{{"Default", 1.0}}));
  // Ours.
  EXPECT_EQ(o.get_string("model"), "mace");
  EXPECT_EQ(o.get_int("batch_capacity"), 3072);
  EXPECT_EQ(o.get_string("sampler"), "fastmlip");
  EXPECT_FALSE(o.get_bool("allow_missing"));
  EXPECT_FALSE(o.has("restart"));
}

TEST(TrainerOptions, CommandLineOverridesTheConfigFileInBothForms) {
  TempFile cfg("cfg.yaml",
               "name: cuni\n"
               "train_file: train.xyz\n"
               "r_max: 4.5\n"
               "radial_MLP: [32, 32]\n"
               "E0s: {Cu: -3.5, 28: -4.25}\n"
               "config_type_weights: {bulk: 2.0, Default: 1}\n"
               "ema: true\n"
               "valid_file: ~\n"
               "model: chgnet\n");
  const CommandLine cl = parse_command_line({"--r_max", "6", "--config", cfg.path, "--lr=0.005", "--ema=no",
                                             "--radial_MLP", "16,16", "--stress_key=virial"});
  const Options& o = cl.options;
  EXPECT_FALSE(cl.help);
  EXPECT_EQ(o.get_string("name"), "cuni");
  EXPECT_EQ(o.origin("name"), cfg.path + ":1");
  EXPECT_EQ(o.get_float("r_max"), 6.0);  // the command line wins although it stands first
  EXPECT_EQ(o.origin("r_max"), "command line");
  EXPECT_EQ(o.get_float("lr"), 0.005);
  EXPECT_FALSE(o.get_bool("ema"));
  EXPECT_EQ(o.get_int_list("radial_MLP"), (std::vector<long long>{16, 16}));
  EXPECT_EQ(o.get_string("E0s"), "{\"Cu\": -3.5, \"28\": -4.25}");
  EXPECT_EQ(o.origin("E0s"), cfg.path + ":5");
  EXPECT_EQ(o.get_dict("config_type_weights"),
            (std::vector<std::pair<std::string, double>>{{"bulk", 2.0}, {"Default", 1.0}}));
  EXPECT_FALSE(o.has("valid_file"));
  EXPECT_EQ(o.get_string("model"), "chgnet");
  EXPECT_EQ(o.get_string("stress_key"), "virial");
}

TEST(TrainerOptions, BoolFlags) {
  Options o;
  o.apply_flags({"--ema", "--allow_missing", "--plot", "false", "--amsgrad=F", "--keep_checkpoints", "yes"});
  EXPECT_TRUE(o.get_bool("ema"));
  EXPECT_TRUE(o.get_bool("allow_missing"));
  EXPECT_FALSE(o.get_bool("plot"));
  EXPECT_FALSE(o.get_bool("amsgrad"));
  EXPECT_TRUE(o.get_bool("keep_checkpoints"));
  // A bare bool flag followed by another flag.
  o.apply_flags({"--plot", "--seed", "7"});
  EXPECT_TRUE(o.get_bool("plot"));
  EXPECT_EQ(o.get_int("seed"), 7);
  // Negative numbers are values, not flags.
  o.apply_flags({"--mean", "-0.25"});
  EXPECT_EQ(o.get_float("mean"), -0.25);
}

TEST(TrainerOptions, NoneClearsOptionalValues) {
  Options o;
  o.apply_flags({"--clip_grad", "None", "--valid_file", "v.xyz"});
  EXPECT_FALSE(o.has("clip_grad"));
  EXPECT_EQ(o.get_string("valid_file"), "v.xyz");
  o.apply_flags({"--valid_file=null"});
  EXPECT_FALSE(o.has("valid_file"));
  const std::string msg = error_of([&] { o.get_string("valid_file"); });
  EXPECT_TRUE(contains(msg, "no value")) << msg;
  // Required and other non-optional options do not take None.
  const std::string bad = error_of([&] { o.apply_flags({"--r_max", "None"}); });
  EXPECT_TRUE(contains(bad, "'r_max'") && contains(bad, "'None'")) << bad;
}

TEST(TrainerOptions, UnknownKeyInTheFileNamesFileLineAndSuggests) {
  TempFile cfg("cfg.yaml", "name: x\ntrain_file: t.xyz\n\nr_maxx: 4.0\n");
  const std::string msg = error_of([&] { parse_command_line({"--config", cfg.path}); });
  EXPECT_TRUE(contains(msg, cfg.path + ":4: unknown option 'r_maxx'")) << msg;
  EXPECT_TRUE(contains(msg, "did you mean 'r_max'?")) << msg;
  EXPECT_TRUE(contains(msg, "Valid options:")) << msg;
  for (const auto& s : option_table()) {
    EXPECT_TRUE(contains(msg, " " + s.name)) << s.name;
  }
}

TEST(TrainerOptions, UnknownKeyOnTheCommandLineSuggests) {
  const std::string msg = error_of([] {
    parse_command_line({"--name", "x", "--train_file", "t", "--num-channels", "8"});
  });
  EXPECT_TRUE(contains(msg, "command line")) << msg;
  EXPECT_TRUE(contains(msg, "unknown option 'num-channels'")) << msg;
  EXPECT_TRUE(contains(msg, "did you mean 'num_channels'?")) << msg;
  EXPECT_EQ(closest_option("forces_wieght"), "forces_weight");
  EXPECT_EQ(closest_option("E0S"), "E0s");
  const std::string pos = error_of([] { parse_command_line({"train.xyz"}); });
  EXPECT_TRUE(contains(pos, "unexpected argument 'train.xyz'")) << pos;
  const std::string missing = error_of([] { Options().apply_flags({"--r_max"}); });
  EXPECT_TRUE(contains(missing, "--r_max needs a value")) << missing;
}

struct BadValue {
  std::vector<std::string> args;
  std::vector<std::string> words;  // each must appear in the message
};

TEST(TrainerOptions, BadValuesNameKeyValueAndWhatIsAllowed) {
  const BadValue cases[] = {
      {{"--r_max", "abc"}, {"'r_max'", "'abc'", "not a finite number", "> 0"}},
      {{"--r_max", "-1"}, {"'r_max'", "'-1'", "must be > 0"}},
      {{"--r_max", "inf"}, {"'r_max'", "'inf'", "finite"}},
      {{"--num_channels", "12.5"}, {"'num_channels'", "'12.5'", "not an integer", ">= 1"}},
      {{"--valid_fraction=1"}, {"'valid_fraction'", "'1'", "in (0, 1)"}},
      {{"--model", "MACE"}, {"'model'", "'MACE'", "not an allowed choice", "one of mace, chgnet"}},
      {{"--sampler", "best"}, {"'sampler'", "'best'", "ffd", "fastmlip", "next-fit"}},
      {{"--default_dtype", "float16"}, {"'default_dtype'", "float32, float64"}},
      {{"--ema", "maybe"}, {"'ema'", "'maybe'"}},
      {{"--radial_MLP", "[64, x]"}, {"'radial_MLP'", "'x' is not an integer"}},
      {{"--radial_MLP", "[64, 0]"}, {"'radial_MLP'", "element", ">= 1"}},
      {{"--E0s", "averaged"}, {"'E0s'", "'averaged'", "'average', a .json file"}},
      {{"--E0s", "{29: x}"}, {"'E0s'", "'x' of key '29' is not a finite number"}},
      {{"--config_type_weights", "{a: 1, a: 2}"}, {"'config_type_weights'", "appears twice"}},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of([&] { Options().apply_flags(c.args); });
    ASSERT_FALSE(msg.empty()) << c.args[0];
    EXPECT_TRUE(contains(msg, "command line")) << msg;
    for (const auto& w : c.words) {
      EXPECT_TRUE(contains(msg, w)) << "'" << w << "' not in: " << msg;
    }
  }
}

TEST(TrainerOptions, BadValuesInTheFileNameTheLine) {
  const std::string msg = error_of([] { Options().load_yaml("name: a\nr_max: [1, 2]\n", "c.yaml"); });
  EXPECT_TRUE(contains(msg, "c.yaml:2: option 'r_max'") && contains(msg, "is a list")) << msg;
  const std::string choice = error_of([] { Options().load_yaml("\n\nscheduler: Exponential\n", "c.yaml"); });
  EXPECT_TRUE(contains(choice, "c.yaml:3: option 'scheduler': value 'Exponential'")) << choice;
  EXPECT_TRUE(contains(choice, "ReduceLROnPlateau, CosineAnnealingLR")) << choice;
  const std::string nested = error_of([] { Options().load_yaml("config: other.yaml\n", "c.yaml"); });
  EXPECT_TRUE(contains(nested, "c.yaml:1") && contains(nested, "only accepted on the command line"))
      << nested;
  try {
    Options().load_yaml("name: a\nr_max: [1, 2\n", "broken.yaml");
    FAIL();
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), "broken.yaml");
    EXPECT_TRUE(contains(e.what(), "not valid YAML")) << e.what();
  }
  EXPECT_THROW(Options().load_yaml("- a\n- b\n", "list.yaml"), FileError);
  EXPECT_THROW(parse_command_line({"--config", "/nonexistent/fastmlip.yaml"}), FileError);
  Options empty;
  empty.load_yaml("", "empty.yaml");  // sets nothing
  EXPECT_EQ(empty.origin("r_max"), "default");
}

TEST(TrainerOptions, RequiredOptionsAreCheckedUnlessHelp) {
  const std::string msg = error_of([] { parse_command_line({"--r_max", "4"}); });
  EXPECT_TRUE(contains(msg, "--name") && contains(msg, "--train_file")) << msg;
  const CommandLine help = parse_command_line({"--r_max", "bad", "--help"});
  EXPECT_TRUE(help.help);
  EXPECT_TRUE(parse_command_line({"-h"}).help);
}

TEST(TrainerOptions, ToYamlReadsBackToTheSameOptions) {
  Options a;
  a.apply_flags({"--name", "run \"1\"", "--train_file", "t.xyz", "--r_max", "4.25", "--E0s", "{Cu: -3.5}",
                 "--radial_MLP", "[8, 16]", "--lr", "1e-3", "--clip_grad", "None", "--config_type_weights",
                 "{'bulk': 0.5}", "--energy_key", "1e3"});
  Options b;
  b.load_yaml(a.to_yaml(), "dump.yaml");
  for (const auto& s : option_table()) {
    if (!s.cli_only) {
      EXPECT_EQ(a.value(s.name), b.value(s.name)) << s.name;
    }
  }
  EXPECT_TRUE(contains(a.to_yaml(), "r_max: 4.25  # command line")) << a.to_yaml();
}

// --embedding_specs (mace_run_train's, a nested mapping): Python-literal or YAML flow text on the
// command line, a YAML map in the file; it survives the options dump, and its features are read
// with mace-torch's keys, an unknown key or a per-atom feature refused by name.
TEST(TrainerOptions, EmbeddingSpecsAreAMappingFromTheCommandLineOrTheFile) {
  Options a;
  a.apply_flags({"--name", "x", "--train_file", "t.xyz", "--embedding_specs",
                 "{'total_charge': {'type': 'categorical', 'per': 'graph', 'num_classes': 5, 'emb_dim': 4, "
                 "'offset': 2}, 'total_spin': {'type': 'continuous', 'emb_dim': 3, 'use_bias': False}}"});
  Options b;
  b.load_yaml(a.to_yaml(), "dump.yaml");
  EXPECT_EQ(a.value("embedding_specs"), b.value("embedding_specs"));
  const auto f = parse_embedding_specs(b.get_string("embedding_specs"));
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].name, "total_charge");
  EXPECT_EQ(f[0].num_classes, 5);
  EXPECT_EQ(f[0].offset, 2);
  EXPECT_EQ(f[1].type, "continuous");
  EXPECT_FALSE(f[1].use_bias);
  Options c;
  c.load_yaml("embedding_specs:\n  total_spin: {type: continuous, emb_dim: 8}\n", "cfg.yaml");
  EXPECT_EQ(parse_embedding_specs(c.get_string("embedding_specs")).at(0).emb_dim, 8);

  EXPECT_TRUE(contains(
      error_of([] { parse_embedding_specs("{total_charge: {type: categorical, emb_dim: 4, colour: red}}"); }),
      "total_charge: unknown key 'colour'"));
  EXPECT_TRUE(contains(
      error_of([] { parse_embedding_specs("{total_spin: {type: continuous, emb_dim: 2, per: node}}"); }),
      "per 'node' is not supported"));
  EXPECT_TRUE(contains(error_of([] { parse_embedding_specs("{total_charge: {type: categorical}}"); }),
                       "'emb_dim' is missing"));
  EXPECT_TRUE(contains(error_of([] {
                         Options().apply_flags({"--embedding_specs", "[1, 2]"});
                       }),
                       "is not a mapping"));
}

TEST(TrainerOptions, HelpListsEveryOptionWithDefaultAndAllowedValues) {
  const std::string help = render_help("train-potential");
  EXPECT_EQ(help.rfind("Usage: train-potential", 0), 0u);
  for (const auto& s : option_table()) {
    EXPECT_TRUE(contains(help, "  --" + s.name + " ")) << s.name;
  }
  EXPECT_TRUE(contains(help, "--r_max FLOAT")) << help;
  EXPECT_TRUE(contains(help, "Default: 5.0. Allowed: a finite number > 0.")) << help;
  EXPECT_TRUE(contains(help, "Allowed: one of mace, chgnet.")) << help;
  EXPECT_TRUE(contains(help, "Default: [64, 64, 64].")) << help;
  EXPECT_TRUE(contains(help, "--help, -h")) << help;
  for (const char* group :
       {"Run:", "Data:", "Model:", "Normalisation:", "Loss:", "Optimisation:", "Batching:"}) {
    EXPECT_TRUE(contains(help, std::string("\n") + group + "\n")) << group;
  }
  std::size_t start = 0;
  while (start < help.size()) {
    const std::size_t end = help.find('\n', start);
    EXPECT_LE(end - start, 100u) << help.substr(start, end - start);
    start = end + 1;
  }
}

TEST(TrainerOptions, FlatDictParser) {
  using Dict = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(parse_flat_dict("{}"), Dict{});
  EXPECT_EQ(parse_flat_dict(" {29: -3.5, 'Ni' : 1e-2,\"Al\":2} "),
            (Dict{{"29", -3.5}, {"Ni", 0.01}, {"Al", 2.0}}));
  EXPECT_THROW(parse_flat_dict("29: 1"), InputError);
  EXPECT_THROW(parse_flat_dict("{29 1}"), InputError);
  EXPECT_THROW(parse_flat_dict("{'a: 1}"), InputError);
  EXPECT_THROW(parse_flat_dict("{a: nan}"), InputError);
}

// Bug (fuzz_options, issue 17): a complex YAML key ("? del: chgnet", "[a]: 1") made
// load_yaml throw yaml-cpp's TypedBadConversion instead of a FileError. Corpus:
// tests/fuzz/corpus/options/regression-complex-key.yaml.
TEST(TrainerOptions, ComplexYamlKeyIsAFileErrorNotAYamlException) {
  for (const char* text : {"name: x\n? del: chgnet\n", "[a, b]: 1\n"}) {
    try {
      Options().load_yaml(text, "c.yaml");
      ADD_FAILURE() << "no error for " << text;
    } catch (const FileError& e) {
      EXPECT_EQ(e.path(), "c.yaml");
      EXPECT_NE(std::string(e.what()).find("plain text"), std::string::npos) << e.what();
    }
  }
}

// Bug (fuzz_options, issue 17): a config_type_weights key with a backslash and control
// characters ("Defau\x15..\\\x15..lt") was accepted, and to_yaml wrote it inside a YAML
// double-quoted key, where the backslash starts an escape: the written config did not load
// back. Such keys are refused where they are parsed. Corpus:
// tests/fuzz/corpus/options/regression-backslash-in-dict-key.bin.
TEST(TrainerOptions, DictKeyWithBackslashQuoteOrControlCharacterIsRefused) {
  for (const std::string& key : {std::string("a\\b"), std::string("a\x15" "b"), std::string("a\"b"), std::string("a'b")}) {
    const std::string quoted = key.find('"') == std::string::npos ? "\"" + key + "\"" : "'" + key + "'";
    EXPECT_THROW(parse_flat_dict("{" + quoted + ": 1.0}"), InputError) << key;
  }
  try {
    Options().load_yaml("train_file: t.xyz\nconfig_type_weights: {bulk: 2.0, \"x\\\\y\": 1.0}\n", "c.yaml");
    ADD_FAILURE() << "no error for a backslash in a key";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("plain text"), std::string::npos) << e.what();
  }
  // Plain keys still round-trip through to_yaml.
  Options o;
  o.load_yaml("name: x\ntrain_file: t.xyz\nconfig_type_weights: {bulk: 2.0, \"a b,c\": 1.5}\n", "c.yaml");
  Options back;
  back.load_yaml(o.to_yaml(), "round-trip.yaml");
  const auto expected = std::vector<std::pair<std::string, double>>{{"bulk", 2.0}, {"a b,c", 1.5}};
  EXPECT_EQ(back.get_dict("config_type_weights"), expected);
}

// Bug (fuzz_options, issue 17): a string option whose YAML value held a line break (a plain
// scalar over several lines) was written by to_yaml with the raw line break inside double
// quotes, which YAML folds into a space: the value changed in the to_yaml -> load_yaml round
// trip. to_yaml now escapes line breaks and control characters. Corpus:
// tests/fuzz/corpus/options/regression-line-break-in-string.bin.
TEST(TrainerOptions, StringWithLineBreaksAndControlCharactersRoundTrips) {
  Options o;
  o.load_yaml("name: x\ntrain_file: \"a\\nb\\r\\tc\\x01d\\\\e\\\"f\"\n", "c.yaml");
  ASSERT_EQ(o.get_string("train_file"), std::string("a\nb\r\tc\x01" "d\\e\"f"));
  Options back;
  back.load_yaml(o.to_yaml(), "round-trip.yaml");
  EXPECT_EQ(back.get_string("train_file"), o.get_string("train_file"));
  // The fuzzer's input: a plain scalar over lines, folded by YAML into one with a line break.
  Options folded;
  folded.load_yaml("name: x\ntrain_file: t.xyz--name\n\n  - 6\n", "c.yaml");
  ASSERT_NE(folded.get_string("train_file").find('\n'), std::string::npos);
  Options folded_back;
  folded_back.load_yaml(folded.to_yaml(), "round-trip.yaml");
  EXPECT_EQ(folded_back.get_string("train_file"), folded.get_string("train_file"));
}

}  // namespace
}  // namespace fastmlip::trainer
