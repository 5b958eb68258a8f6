// RunConfig: strict JSON keys, range checks by name, CLI values, round trip.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "train/model_defaults.h"
#include "train/run_config.h"

using engine::parse_run_config;
using engine::RunConfig;

namespace {
std::string error_of(const std::string& json) {
  try {
    parse_run_config(json, "cfg.json");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(RunConfig, ParsesTheKeysOfTheCli) {
  const RunConfig c = parse_run_config(
      R"({"recipe":"mixed-fp16","model":"cnn","dataset":"spirals","epochs":3,"batch":64,
          "optimizer":"adam","lr":0.001,"seed":7,"backend":"cpu",
          "loss_scale":{"mode":"static","init":1024,"growth_interval":10},
          "layers":{"fc1":"fp16","fc2":{"compute":"bf16","accumulate":"fp32"}}})",
      "cfg.json");
  EXPECT_EQ(c.recipe, "mixed-fp16");
  EXPECT_EQ(c.model, "cnn");
  EXPECT_EQ(c.dataset, "spirals");
  EXPECT_EQ(c.epochs, 3);
  EXPECT_EQ(c.batch, 64);
  EXPECT_EQ(c.optimizer, "adam");
  EXPECT_DOUBLE_EQ(c.lr, 0.001);
  EXPECT_EQ(c.seed, 7u);
  EXPECT_TRUE(c.loss_scale_set);
  EXPECT_EQ(c.loss_scale.mode, engine::ScalingMode::Static);
  EXPECT_EQ(c.loss_scale.init_scale, 1024.0);
  EXPECT_EQ(c.loss_scale.growth_interval, 10);
  ASSERT_EQ(c.layers.size(), 2u);
  EXPECT_EQ(c.layers.at("fc1").compute, engine::Format::FP16);
  EXPECT_EQ(c.layers.at("fc1").storage, engine::Format::FP16);
  EXPECT_EQ(c.layers.at("fc2").compute, engine::Format::BF16);
  EXPECT_EQ(c.layers.at("fc2").grad, engine::Format::BF16);
}

TEST(RunConfig, RejectsUnknownKeysByName) {
  const std::string e = error_of(R"({"lerning_rate": 0.1})");
  EXPECT_EQ(e, "cfg.json: unknown key 'lerning_rate'");
  EXPECT_NE(error_of(R"({"loss_scale":{"grow":2}})").find("loss_scale.grow"), std::string::npos);
  EXPECT_NE(error_of(R"({"layers":{"fc1":{"comput":"fp16"}}})").find("layers.fc1.comput"), std::string::npos);
}

TEST(RunConfig, RejectsOutOfRangeValuesByName) {
  EXPECT_NE(error_of(R"({"batch": 0})").find("'batch'"), std::string::npos);
  EXPECT_NE(error_of(R"({"lr": -1})").find("'lr'"), std::string::npos);
  EXPECT_NE(error_of(R"({"recipe": "fp64"})").find("unknown recipe 'fp64'"), std::string::npos);
  EXPECT_NE(error_of(R"({"model": "resnet"})").find("'model'"), std::string::npos);
  EXPECT_NE(error_of(R"({"epochs": "three"})").find("'epochs' must be a number"), std::string::npos);
  EXPECT_NE(error_of(R"({"epochs": 1.5})").find("'epochs' must be an integer"), std::string::npos);
  EXPECT_NE(error_of(R"({"loss_scale":{"backoff_factor":2}})").find("loss_scale.backoff_factor"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"layers":{"fc1":"fp12"}})").find("layers.fc1"), std::string::npos);
}

TEST(RunConfig, ErrorsAreOneLine) {
  for (const char* bad : {"{", R"({"batch": 0})", "[1,2]", R"({"x": 1})"}) {
    const std::string e = error_of(bad);
    ASSERT_FALSE(e.empty()) << bad;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_EQ(e.rfind("cfg.json: ", 0), 0u) << e;
  }
}

TEST(RunConfig, CliValuesUseTheSameChecks) {
  RunConfig c;
  engine::set_config_value(c, "weight-decay", "0.01", "--weight-decay");
  EXPECT_DOUBLE_EQ(c.weight_decay, 0.01);
  EXPECT_THROW(engine::set_config_value(c, "batch", "12x", "--batch"), std::runtime_error);
  EXPECT_THROW(engine::set_config_value(c, "nope", "1", "--nope"), std::runtime_error);
}

TEST(RunConfig, JsonRoundTrips) {
  RunConfig c;
  c.recipe = "fp8";
  c.model = "transformer";
  c.steps = 123;
  c.lr = 0.1234567890123;
  c.seed = 42;
  c.widths = {64, 32};
  c.loss_scale_set = true;
  c.loss_scale.growth_interval = 50;
  c.layers["blk0.ln1"] = {engine::Format::FP16, engine::Format::FP16, engine::Format::FP16, engine::Format::FP16};
  c.compare = {"fp32", "fp16"};
  const RunConfig d = parse_run_config(engine::to_json(c), "roundtrip");
  EXPECT_EQ(d.recipe, c.recipe);
  EXPECT_EQ(d.model, c.model);
  EXPECT_EQ(d.steps, c.steps);
  EXPECT_EQ(d.lr, c.lr);
  EXPECT_EQ(d.seed, c.seed);
  EXPECT_EQ(d.widths, c.widths);
  EXPECT_EQ(d.loss_scale.growth_interval, 50);
  EXPECT_EQ(d.layers.at("blk0.ln1"), c.layers.at("blk0.ln1"));
  EXPECT_EQ(d.compare, c.compare);
}

TEST(RunConfig, LessonSettingsParseRoundTripAndAreChecked) {
  const RunConfig c = parse_run_config(
      R"({"master_weights": false, "weight_rounding": "stochastic", "fp8_scaling": "none"})", "cfg.json");
  EXPECT_EQ(c.master_weights, 0);
  EXPECT_EQ(c.weight_rounding, "stochastic");
  EXPECT_EQ(c.fp8_scaling, "none");
  const RunConfig d = parse_run_config(engine::to_json(c), "roundtrip");
  EXPECT_EQ(d.master_weights, 0);
  EXPECT_EQ(d.weight_rounding, "stochastic");
  EXPECT_EQ(d.fp8_scaling, "none");
  EXPECT_EQ(parse_run_config("{}", "cfg.json").master_weights, -1);  // the recipe decides
  EXPECT_EQ(error_of(R"({"weight_rounding": "up"})"),
            "cfg.json: 'weight_rounding' must be nearest or stochastic (got 'up')");
  EXPECT_EQ(error_of(R"({"fp8_scaling": "current"})"), "cfg.json: 'fp8_scaling' must be delayed or none (got 'current')");
  EXPECT_EQ(error_of(R"({"master_weights": "maybe"})"),
            "cfg.json: 'master_weights' must be true, false or recipe (got 'maybe')");
}

TEST(RunConfig, JsonTypesAreChecked) {
  // A number written as a string is a mistake, not a value.
  EXPECT_EQ(error_of(R"({"lr": "0.1"})"), "cfg.json: 'lr' must be a number (got the string \"0.1\")");
  EXPECT_EQ(error_of(R"({"steps": true})"), "cfg.json: 'steps' must be a number (got true)");
  EXPECT_EQ(error_of(R"({"recipe": 16})"), "cfg.json: 'recipe' must be a string (got 16)");
  EXPECT_EQ(error_of(R"({"loss_scale": {"init": "65536"}})"),
            "cfg.json: 'loss_scale.init' must be a number (got \"65536\")");
  EXPECT_EQ(error_of(R"({"lr": 0.1, "recipe": "fp16", "loss_scale": {"mode": "dynamic", "init": 1024}})"), "");
}

TEST(RunConfig, ANumberBeyondDoubleIsAnErrorNotACrash) {
  // Found by fuzz_config: nlohmann reports 1e999 as out_of_range, which the
  // parser did not catch (std::terminate).
  const std::string e = error_of(R"({"lr": 1e999})");
  EXPECT_EQ(e.rfind("cfg.json: not valid JSON: ", 0), 0u) << e;
  EXPECT_NE(e.find("number overflow"), std::string::npos) << e;
}

TEST(RunConfig, GptKeysParseRoundTripAndAreChecked) {
  const RunConfig c = parse_run_config(
      R"({"model":"gpt","dataset":"jargon","layers":6,"width":96,"heads":3,"context":32,"qk_norm":true})", "cfg.json");
  EXPECT_EQ(c.depth, 6);
  EXPECT_EQ(c.width, 96);
  EXPECT_EQ(c.heads, 3);
  EXPECT_EQ(c.context, 32);
  EXPECT_TRUE(c.qk_norm);
  const RunConfig back = parse_run_config(engine::to_json(c), "config.json");
  EXPECT_EQ(back.depth, 6);
  EXPECT_EQ(back.width, 96);
  EXPECT_EQ(back.heads, 3);
  EXPECT_EQ(back.context, 32);
  EXPECT_TRUE(back.qk_norm);
  EXPECT_EQ(engine::to_json(back), engine::to_json(c));
  // "layers" as an object is still the per-layer precisions, beside the depth.
  const RunConfig both = parse_run_config(R"({"model":"gpt","layers":{"head":"bf16"}})", "cfg.json");
  EXPECT_EQ(engine::model_shape(both).depth, 4);  // unset: the gpt's default
  EXPECT_EQ(both.layers.at("head").compute, engine::Format::BF16);
  // The other models' config.json carry no gpt keys.
  EXPECT_EQ(engine::to_json(RunConfig{}).find("width"), std::string::npos);
  EXPECT_EQ(error_of(R"({"model":"gpt","width":100,"heads":3})"),
            "cfg.json: 'heads' must divide width 100 (got 3)");
  EXPECT_NE(error_of(R"({"layers":0})").find("'layers' must be in 1..64"), std::string::npos);
  EXPECT_NE(error_of(R"({"context":0})").find("'context'"), std::string::npos);
  EXPECT_NE(error_of(R"({"qk_norm":"yes"})").find("'qk_norm'"), std::string::npos);
  EXPECT_NE(error_of(R"({"z_loss":2})").find("'z_loss' must be in [0, 1]"), std::string::npos);
  EXPECT_EQ(parse_run_config(R"({"model":"gpt","z_loss":0.0001})", "cfg.json").z_loss, 0.0001);
  EXPECT_EQ(parse_run_config(engine::to_json(parse_run_config(R"({"model":"gpt","z_loss":0.0001})", "c")), "c").z_loss,
            0.0001);
  RunConfig cli;
  engine::set_config_value(cli, "qk-norm", "true", "--qk-norm");
  engine::set_config_value(cli, "layers", "2", "--layers");
  EXPECT_TRUE(cli.qk_norm);
  EXPECT_EQ(cli.depth, 2);
}

// eval_batches: parsed, written back only when set (older config.json and
// journals read and write as before), negative refused by name.
TEST(RunConfig, EvalBatchesParsesRoundTripsAndIsChecked) {
  const RunConfig c = parse_run_config(R"({"eval_batches":4})", "cfg.json");
  EXPECT_EQ(c.eval_batches, 4);
  EXPECT_EQ(parse_run_config(engine::to_json(c), "config.json").eval_batches, 4);
  EXPECT_EQ(engine::to_json(RunConfig{}).find("eval_batches"), std::string::npos);
  EXPECT_NE(error_of(R"({"eval_batches":-1})").find("'eval_batches' must be >= 0"), std::string::npos);
  RunConfig cli;
  engine::set_config_value(cli, "eval-batches", "3", "--eval-batches");
  EXPECT_EQ(cli.eval_batches, 3);
}

// The optimizer a model starts from (the CLI and the setup panel share it):
// the image models keep SGD at 0.05, the gpt takes AdamW at 1e-3; what the
// user named stays, and a named optimizer brings its own rate.
TEST(ModelDefaults, TheGptStartsFromAdamWTheOthersFromSgd) {
  for (const char* model : {"mlp", "cnn", "transformer"}) {
    EXPECT_EQ(engine::optimizer_defaults(model).optimizer, "sgd") << model;
    EXPECT_EQ(engine::optimizer_defaults(model).lr, 0.05) << model;
  }
  EXPECT_EQ(engine::optimizer_defaults("gpt").optimizer, "adamw");
  EXPECT_EQ(engine::optimizer_defaults("gpt").lr, 1e-3);
  engine::RunConfig c;
  c.model = "gpt";
  engine::apply_optimizer_defaults(c, false, false);
  EXPECT_EQ(c.optimizer, "adamw");
  EXPECT_EQ(c.lr, 1e-3);
  c.optimizer = "sgd";
  engine::apply_optimizer_defaults(c, true, false);
  EXPECT_EQ(c.optimizer, "sgd");
  EXPECT_EQ(c.lr, 0.05);
  c.optimizer = "adam";
  c.lr = 0.02;
  engine::apply_optimizer_defaults(c, true, true);
  EXPECT_EQ(c.optimizer, "adam");
  EXPECT_EQ(c.lr, 0.02);
  c.lr = 0.02;
  engine::apply_optimizer_defaults(c, false, true);
  EXPECT_EQ(c.optimizer, "adamw");
  EXPECT_EQ(c.lr, 0.02);
  engine::RunConfig mlp;
  mlp.optimizer = "adamw";
  engine::apply_optimizer_defaults(mlp, false, false);
  EXPECT_EQ(mlp.optimizer, "sgd");
  EXPECT_EQ(mlp.lr, 0.05);
}

// keep_initial: on, off, or auto (kept up to kKeepInitialAutoSamples samples);
// written to config.json only when not auto, and read back.
TEST(RunConfig, KeepInitialDecidesWhetherTheStartingPointIsKept) {
  engine::RunConfig c;
  EXPECT_EQ(c.keep_initial, "auto");
  c.batch = 128;
  const std::int64_t limit = engine::kKeepInitialAutoSamples / 128;
  EXPECT_TRUE(engine::keeps_initial_state(c, limit));
  EXPECT_FALSE(engine::keeps_initial_state(c, limit + 1));
  engine::set_config_value(c, "keep-initial", "on", "--keep-initial");
  EXPECT_TRUE(engine::keeps_initial_state(c, limit * 100));
  engine::set_config_value(c, "keep_initial", "off", "--keep-initial");
  EXPECT_FALSE(engine::keeps_initial_state(c, 1));
  EXPECT_EQ(engine::parse_run_config(engine::to_json(c), "c.json").keep_initial, "off");
  EXPECT_EQ(engine::to_json(engine::RunConfig{}).find("keep_initial"), std::string::npos);
  c.keep_initial = "sometimes";
  try {
    engine::validate(c, "c.json");
    FAIL() << "accepted keep_initial 'sometimes'";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'keep_initial' must be auto, on or off"), std::string::npos) << e.what();
  }
}

TEST(RunConfig, TransformerAndCnnShapesParseRoundTripAndAreChecked) {
  // The transformer reads the gpt's keys; config.json writes only what is
  // not its default, so a default transformer's config.json is as before.
  RunConfig vit = parse_run_config(R"({"model":"transformer"})", "cfg.json");
  EXPECT_EQ(engine::to_json(vit).find("\"width\""), std::string::npos);
  EXPECT_EQ(engine::to_json(vit).find("\"depth\""), std::string::npos);
  EXPECT_EQ(engine::model_shape(vit), engine::default_shape("transformer"));
  EXPECT_EQ(engine::model_shape(vit).width, 64);
  vit = parse_run_config(R"({"model":"transformer","depth":3,"width":96,"heads":4})", "cfg.json");
  const std::string j = engine::to_json(vit);
  EXPECT_NE(j.find("\"depth\": 3"), std::string::npos) << j;
  EXPECT_NE(j.find("\"width\": 96"), std::string::npos) << j;
  EXPECT_EQ(j.find("\"heads\""), std::string::npos) << j;  // 4 is the default
  EXPECT_EQ(j.find("\"context\""), std::string::npos) << j;
  const RunConfig back = parse_run_config(j, "config.json");
  EXPECT_EQ(engine::model_shape(back), engine::model_shape(vit));
  EXPECT_EQ(engine::to_json(back), j);
  // Bad shapes: one line naming the field.
  EXPECT_EQ(error_of(R"({"model":"transformer","width":90})"), "cfg.json: 'heads' must divide width 90 (got 4)");
  EXPECT_EQ(error_of(R"({"model":"transformer","depth":0})"), "cfg.json: 'depth' must be in 1..64 (got 0)");
  EXPECT_EQ(error_of(R"({"model":"transformer","width":-8})"), "cfg.json: 'width' must be in 1..8192 (got -8)");
  EXPECT_EQ(error_of(R"({"model":"transformer","heads":0})"), "cfg.json: 'heads' must divide width 64 (got 0)");

  RunConfig cnn = parse_run_config(R"({"model":"cnn","channels":[16,48]})", "cfg.json");
  EXPECT_EQ(cnn.channels, (std::vector<std::int64_t>{16, 48}));
  EXPECT_NE(engine::to_json(cnn).find("\"channels\""), std::string::npos);
  EXPECT_EQ(parse_run_config(engine::to_json(cnn), "c").channels, cnn.channels);
  // The default channels are not written (a default cnn's config.json is as before).
  cnn.channels = {32, 64};
  EXPECT_EQ(engine::to_json(cnn), engine::to_json(parse_run_config(R"({"model":"cnn"})", "c")));
  RunConfig cli;
  engine::set_config_value(cli, "channels", "8,24", "--channels");
  EXPECT_EQ(cli.channels, (std::vector<std::int64_t>{8, 24}));
  EXPECT_EQ(error_of(R"({"model":"cnn","channels":[0,8]})"), "cfg.json: 'channels' entries must be in 1..4096 (got 0)");
  EXPECT_EQ(error_of(R"({"model":"cnn","channels":[]})"), "cfg.json: 'channels' must list 1 to 4 conv stages (got 0)");
  EXPECT_EQ(error_of(R"({"model":"cnn","channels":[8,8,8,8,8]})"),
            "cfg.json: 'channels' must list 1 to 4 conv stages (got 5)");
  EXPECT_EQ(error_of(R"({"model":"cnn","channels":"8,x"})"), "cfg.json: 'channels' must be an integer (got 'x')");
  EXPECT_EQ(error_of(R"({"model":"mlp","widths":[256,-1]})"), "cfg.json: 'widths' entries must be in 1..65536 (got -1)");
}

TEST(RunConfig, SizeGpuSetsEveryModelsShapeAndExplicitFieldsOverrideIt) {
  const auto sized = [](const std::string& model) {
    return parse_run_config(R"({"model":")" + model + R"(","size":"gpu"})", "cfg.json");
  };
  const RunConfig mlp = sized("mlp");
  EXPECT_EQ(mlp.widths, (std::vector<std::int64_t>{4096, 4096, 4096}));
  EXPECT_EQ(mlp.batch, 1024);
  EXPECT_EQ(sized("cnn").channels, (std::vector<std::int64_t>{128, 256}));
  const RunConfig vit = sized("transformer");
  EXPECT_EQ(engine::model_shape(vit).depth, 8);
  EXPECT_EQ(engine::model_shape(vit).width, 1024);
  EXPECT_EQ(engine::model_shape(vit).heads, 16);
  // Tensor Cores want big GEMMs: tokens per batch x width, 16 tokens a sample.
  EXPECT_GE(vit.batch * 16, 4096);
  const RunConfig gpt = sized("gpt");
  EXPECT_EQ(engine::model_shape(gpt).width, 768);
  EXPECT_EQ(gpt.context, 256);
  EXPECT_GE(gpt.batch * gpt.context, 8192);
  for (const char* m : {"mlp", "cnn", "transformer", "gpt"}) {
    EXPECT_EQ(engine::size_of(sized(m)), "gpu") << m;
    EXPECT_EQ(engine::size_of(parse_run_config(R"({"model":")" + std::string(m) + R"("})", "c")), "default") << m;
    // config.json holds the shape itself (the PyTorch peer reads it), and reads back the same.
    const RunConfig back = parse_run_config(engine::to_json(sized(m)), "config.json");
    EXPECT_EQ(engine::model_shape(back), engine::model_shape(sized(m))) << m;
    EXPECT_EQ(back.batch, sized(m).batch) << m;
  }
  EXPECT_NE(engine::to_json(vit).find("\"width\": 1024"), std::string::npos);
  // Explicit fields win, wherever the key stands (JSON objects have no order).
  const RunConfig over = parse_run_config(R"({"width":512,"model":"transformer","size":"gpu","batch":64})", "c");
  EXPECT_EQ(engine::model_shape(over).width, 512);
  EXPECT_EQ(engine::model_shape(over).depth, 8);
  EXPECT_EQ(over.batch, 64);
  EXPECT_EQ(engine::size_of(over), "");
  // "layers" as an object is the precisions, not the depth: the size still sets the depth.
  EXPECT_EQ(engine::model_shape(parse_run_config(R"({"model":"gpt","size":"gpu","layers":{"head":"bf16"}})", "c")).depth,
            8);
  // default resets; an unknown size names the field.
  RunConfig back = vit;
  engine::apply_size(back, "default");
  EXPECT_EQ(engine::to_json(back), engine::to_json(parse_run_config(R"({"model":"transformer"})", "c")));
  EXPECT_EQ(error_of(R"({"size":"huge"})"), "cfg.json: 'size' must be default or gpu (got 'huge')");
  EXPECT_EQ(error_of(R"({"size":3})"), "cfg.json: 'size' must be a string (got 3)");
}
