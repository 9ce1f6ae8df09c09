// ac_libtorch train: the `libtorch` backend of Study A. The semantics are study_a/eager.py's, step for step:
// - epoch e visits the training split in row e of the sample-order file, in consecutive batches (last one kept);
// - a batch's uint8 images are gathered on the host, copied to the device and normalised there;
// - train step: cross-entropy (mean), zero grads, backward, SGD (lr, momentum, weight decay; no dampening or
//   Nesterov: torch.optim.SGD's update);
// - after each epoch, evaluation on the test split in order, batches of --eval-batch-size, eval mode, no grad;
// - a timed step runs from before the host-to-device copy to after the optimizer step (train) or the logits
//   (eval); the per-phase time_s is the sum of the steps, wall_s the phase's wall-clock time.
// One `phase` record per (epoch, phase) carries the training table's columns. Flags:
//   --train-images --train-labels --train-count --test-images --test-labels --test-count
//   --channels --height --width --classes --mean m0,m1,.. --std s0,s1,..   (from the prepared manifest)
//   --weights FILE --order FILE --epochs --batch-size --eval-batch-size --lr --momentum --weight-decay
//   --device cpu|cuda[:N] --tf32 0|1 --cudnn-benchmark 0|1
//   [--save-weights FILE]  final weights, in the weights-file format (parity tests)
//   [--log-steps 0|1]      one `step` record with the loss after every train step (synchronises; tests only)
#include <algorithm>

#include "fault.h"
#include "prepared.h"
#include "programs.h"
#include "resnet.h"
#include "runtime.h"
#include "weights_file.h"

namespace ac {
namespace {

// Sample-weighted loss and accuracy, accumulated on the device so that no step waits for the GPU.
struct PhaseStats {
  torch::Tensor loss_sum, correct;
  int64_t samples = 0;

  explicit PhaseStats(torch::Device device)
      : loss_sum(torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device))),
        correct(torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(device))) {}

  void add(const torch::Tensor& logits, const torch::Tensor& labels, const torch::Tensor& loss) {
    loss_sum += loss.detach().to(torch::kFloat64) * labels.size(0);
    correct += logits.argmax(1).eq(labels).sum();
    samples += labels.size(0);
  }
};

struct Data {
  Split split;
  torch::Tensor images, labels;  // CPU views of split's buffers

  explicit Data(Split s) : split(std::move(s)) {
    images = torch::from_blob(split.images.data(), {split.count, split.channels, split.height, split.width},
                              torch::kUInt8);
    labels = torch::from_blob(split.labels.data(), {split.count}, torch::kInt64);
  }
};

void emit_phase(int64_t epoch, const char* name, PhaseStats& stats, const StepTimer& timer, Phase& phase) {
  const double n = static_cast<double>(std::max<int64_t>(stats.samples, 1));
  const double loss = stats.loss_sum.item<double>() / n;  // waits for the phase's work, as eager's result()
  const double accuracy = static_cast<double>(stats.correct.item<int64_t>()) / n;
  phase.finish();
  double time_ms = 0;
  for (double ms : timer.elapsed_ms()) time_ms += ms;
  Record r("phase");
  r.add("epoch", epoch).add("phase", name).add("loss", loss).add("accuracy", accuracy)
      .add("samples", stats.samples).add("time_s", time_ms / 1000.0).add("time_per_sample_ms", time_ms / n);
  phase.describe(r);
  r.emit();
}

}  // namespace

int train_main(const Args& a) {
  const Session session = open_session(a);
  const int64_t channels = a.integer("channels"), height = a.integer("height"), width = a.integer("width");
  const int64_t classes = a.integer("classes");
  Data train(read_split(a.str("train-images"), a.str("train-labels"), a.integer("train-count"), channels, height,
                        width, classes));
  Data test(read_split(a.str("test-images"), a.str("test-labels"), a.integer("test-count"), channels, height,
                       width, classes));
  const int64_t epochs = a.integer("epochs"), batch_size = a.integer("batch-size");
  const int64_t eval_batch_size = a.integer("eval-batch-size");
  if (epochs < 1 || batch_size < 1 || eval_batch_size < 1)
    throw ArgError("--epochs, --batch-size and --eval-batch-size must be at least 1");
  const std::vector<int32_t> order = read_order(a.str("order"), epochs, train.split.count);
  const std::string weights_path = a.str("weights");
  const auto weights = read_weights(weights_path);
  const Normaliser normalise(a.numbers("mean"), a.numbers("std"), channels, session.device);
  const auto sgd = torch::optim::SGDOptions(a.number("lr")).momentum(a.number("momentum")).dampening(0.0)
                       .weight_decay(a.number("weight-decay")).nesterov(false);
  const std::string save_path = a.str("save-weights", "");
  const bool log_steps = a.has("log-steps") && a.boolean("log-steps");
  a.reject_unused();

  ResNet50 model(channels, classes);
  load_weights(*model, weights, weights_path);
  model->to(session.device);
  torch::optim::SGD optimizer(model->parameters(), sgd);
  emit_start(session, "train");

  const torch::Tensor order_all = torch::from_blob(const_cast<int32_t*>(order.data()),
                                                   {epochs, train.split.count}, torch::kInt32);
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    {  // train
      fault_point("train", epoch);
      model->train();
      PhaseStats stats(session.device);
      StepTimer timer(session.cuda(), session.stream());
      Phase phase(session);
      const torch::Tensor row = order_all[epoch].to(torch::kInt64);
      int64_t step = 0;
      for (int64_t start = 0; start < train.split.count; start += batch_size, ++step) {
        const torch::Tensor idx = row.slice(0, start, std::min(start + batch_size, train.split.count));
        timer.start();
        const torch::Tensor x = normalise(train.images.index_select(0, idx));
        const torch::Tensor y = train.labels.index_select(0, idx).to(session.device);
        const torch::Tensor logits = model->forward(x);
        const torch::Tensor loss = torch::nn::functional::cross_entropy(logits, y);
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        timer.stop();
        stats.add(logits, y, loss);
        if (log_steps) Record("step").add("epoch", epoch).add("step", step).add("loss", loss.item<double>()).emit();
      }
      emit_phase(epoch, "train", stats, timer, phase);
    }
    {  // eval
      fault_point("eval", epoch);
      torch::NoGradGuard no_grad;
      model->eval();
      PhaseStats stats(session.device);
      StepTimer timer(session.cuda(), session.stream());
      Phase phase(session);
      for (int64_t start = 0; start < test.split.count; start += eval_batch_size) {
        const int64_t end = std::min(start + eval_batch_size, test.split.count);
        timer.start();
        const torch::Tensor x = normalise(test.images.slice(0, start, end));
        const torch::Tensor y = test.labels.slice(0, start, end).to(session.device);
        const torch::Tensor logits = model->forward(x);
        timer.stop();
        stats.add(logits, y, torch::nn::functional::cross_entropy(logits, y));
      }
      emit_phase(epoch, "eval", stats, timer, phase);
    }
  }
  if (!save_path.empty()) write_weights(save_path, state_of(*model));
  return 0;
}

}  // namespace ac
