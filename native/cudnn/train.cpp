// ac_cudnn train: the `cudnn` training backend of Study A, with study_a/eager.py's semantics step for step:
// - epoch e visits the training split in row e of the sample-order file, in consecutive batches (last one kept);
// - a batch's uint8 images are gathered on the host, copied to the device and normalised there;
// - train step: cross-entropy (mean), backward, SGD (lr, momentum, weight decay; no dampening or Nesterov);
// - after each epoch, evaluation on the test split in order, batches of --eval-batch-size, running statistics;
// - a timed step runs from before the host-to-device copy to after the SGD update (train) or the logits (eval;
//   with the loss and accuracy kernels, which run inside the step so that a CUDA graph holds the whole step).
// One `phase` record per (epoch, phase), as ac_libtorch train writes, plus conv_algo and workspace_mib. Flags:
//   --train-images --train-labels --train-count --test-images --test-labels --test-count
//   --channels --height --width --classes --mean m0,m1,.. --std s0,s1,..   (from the prepared manifest)
//   --weights FILE --order FILE --epochs --batch-size --eval-batch-size --lr --momentum --weight-decay
//   --device cuda[:N] --tf32 0|1 --conv-algo heuristic|find --workspace-limit-mib N
//   [--graphs 0|1]         replay each step as a CUDA graph (captured on a batch size's second step)
//   [--save-weights FILE]  final weights, in the weights-file format (parity tests)
//   [--log-steps 0|1]      one `step` record with the loss after every train step (synchronises; tests only)
#include <algorithm>
#include <cstring>

#include "kernels.h"
#include "parameters.h"
#include "prepared.h"
#include "program.h"
#include "resnet.h"

namespace ac::cudnn {
namespace {

// Device-side sums of one phase (no step waits for the GPU) and the per-batch scratch of the loss.
struct PhaseStats {
  Buffer<double> loss_sum;
  Buffer<long long> correct;
  Buffer<float> batch_loss;  // the last batch's mean loss
  int64_t samples = 0;

  PhaseStats() : loss_sum(1, "phase loss"), correct(1, "phase accuracy"), batch_loss(1, "batch loss") {}

  void reset(Gpu& gpu) {
    CUDA_CHECK(cudaMemsetAsync(loss_sum.get(), 0, sizeof(double), gpu.stream()), "phase statistics");
    CUDA_CHECK(cudaMemsetAsync(correct.get(), 0, sizeof(long long), gpu.stream()), "phase statistics");
    samples = 0;
  }
};

// One batch on the host, gathered by sample indices, and its device copies.
struct Batch {
  int64_t image_bytes;
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
  Buffer<uint8_t> images_dev;
  Buffer<int64_t> labels_dev;
  Buffer<float> x, loss_rows, dlogits;
  Buffer<int> correct_rows;

  Batch(int capacity, int64_t image_bytes_, int classes)
      : image_bytes(image_bytes_), images(capacity * image_bytes_), labels(capacity),
        images_dev(capacity * image_bytes_, "input batch (uint8)"), labels_dev(capacity, "labels"),
        x(capacity * image_bytes_, "input batch (float)"), loss_rows(capacity, "per-sample loss"),
        dlogits(int64_t{capacity} * classes, "logits gradient"), correct_rows(capacity, "per-sample accuracy") {}

  void gather(const Split& split, const int32_t* indices, int n) {
    for (int i = 0; i < n; ++i) {
      std::memcpy(images.data() + i * image_bytes, split.images.data() + indices[i] * image_bytes, image_bytes);
      labels[i] = split.labels[indices[i]];
    }
  }

  // From pageable memory, as eager's torch.from_numpy(...).to(device): the call returns once the host buffer
  // has been staged, so the next gather may overwrite it.
  void upload(Gpu& gpu, int n) {
    CUDA_CHECK(cudaMemcpyAsync(images_dev.get(), images.data(), n * image_bytes, cudaMemcpyHostToDevice,
                               gpu.stream()),
               "input copy");
    CUDA_CHECK(cudaMemcpyAsync(labels_dev.get(), labels.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice,
                               gpu.stream()),
               "label copy");
  }
};

void emit_phase(Gpu& gpu, int64_t epoch, const char* name, PhaseStats& stats, const StepTimer& timer,
                Phase& phase) {
  phase.finish(gpu);
  double loss_sum = 0;
  long long correct = 0;
  CUDA_CHECK(cudaMemcpy(&loss_sum, stats.loss_sum.get(), sizeof loss_sum, cudaMemcpyDeviceToHost), name);
  CUDA_CHECK(cudaMemcpy(&correct, stats.correct.get(), sizeof correct, cudaMemcpyDeviceToHost), name);
  const double n = static_cast<double>(std::max<int64_t>(stats.samples, 1));
  double time_ms = 0;
  for (double ms : timer.elapsed_ms()) time_ms += ms;
  Record r("phase");
  r.add("epoch", epoch).add("phase", name).add("loss", loss_sum / n).add("accuracy", static_cast<double>(correct) / n)
      .add("samples", stats.samples).add("time_s", time_ms / 1000.0).add("time_per_sample_ms", time_ms / n);
  phase.describe(r, gpu);
  r.emit();
}

}  // namespace

int train_main(const Args& a) {
  const std::string device = a.str("device");
  const ConvSettings settings = conv_settings(a);
  const int channels = static_cast<int>(a.integer("channels")), height = static_cast<int>(a.integer("height"));
  const int width = static_cast<int>(a.integer("width")), classes = static_cast<int>(a.integer("classes"));
  const Split train = read_split(a.str("train-images"), a.str("train-labels"), a.integer("train-count"), channels,
                                 height, width, classes);
  const Split test = read_split(a.str("test-images"), a.str("test-labels"), a.integer("test-count"), channels,
                                height, width, classes);
  const int64_t epochs = a.integer("epochs"), batch_size = a.integer("batch-size");
  const int64_t eval_batch_size = a.integer("eval-batch-size");
  if (epochs < 1 || batch_size < 1 || eval_batch_size < 1)
    throw ArgError("--epochs, --batch-size and --eval-batch-size must be at least 1");
  const std::vector<int32_t> order = read_order(a.str("order"), epochs, train.count);
  const std::string weights_path = a.str("weights");
  const std::vector<NamedTensor> weights = read_weights(weights_path);
  Normaliser normalise(a.numbers("mean"), a.numbers("std"), channels);
  const float lr = static_cast<float>(a.number("lr")), momentum = static_cast<float>(a.number("momentum"));
  const float weight_decay = static_cast<float>(a.number("weight-decay"));
  const bool graphs = a.has("graphs") && a.boolean("graphs");
  const std::string save_path = a.str("save-weights", "");
  const bool log_steps = a.has("log-steps") && a.boolean("log-steps");
  a.reject_unused();

  LoadedNetwork loaded(weights, weights_path, channels, classes, device, settings, /*for_training=*/true,
                       normalise);
  Gpu& gpu = loaded.gpu;
  ResNet50& net = loaded.net;
  ParameterSet& params = loaded.params;
  // training storage for the training batch, the evaluation's five buffers for its own batch (resnet.h): at
  // batch 16 / eval batch 128 training storage for 128 would hold 8× the activations training needs
  const Capacity capacity{static_cast<int>(std::max<int64_t>(std::min(batch_size, train.count), 1)),
                          static_cast<int>(std::max<int64_t>(std::min(eval_batch_size, test.count), 1))};
  net.reserve(capacity, height, width);
  Batch batch(std::max(capacity.training, capacity.inference), train.image_bytes(), classes);
  PhaseStats stats;
  GraphReplay train_steps(graphs), eval_steps(graphs);
  const int64_t hw = int64_t{height} * width;
  emit_start(gpu, "train");

  std::vector<int32_t> test_indices(test.count);
  for (int64_t i = 0; i < test.count; ++i) test_indices[i] = static_cast<int32_t>(i);
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    {  // train
      stats.reset(gpu);
      StepTimer timer(true, gpu.stream());
      Phase phase;
      const int32_t* row = order.data() + epoch * train.count;
      int64_t step = 0;
      for (int64_t start = 0; start < train.count; start += batch_size, ++step) {
        const int n = static_cast<int>(std::min(batch_size, train.count - start));
        batch.gather(train, row + start, n);
        timer.start();
        batch.upload(gpu, n);
        train_steps.run(gpu, n, [&] {
          normalise(gpu, batch.images_dev.get(), batch.x.get(), n, hw);
          const float* logits = net.forward(gpu, batch.x.get(), n, true);
          softmax_cross_entropy(logits, batch.labels_dev.get(), n, classes, batch.loss_rows.get(),
                                batch.correct_rows.get(), batch.dlogits.get(), gpu.stream());
          accumulate_batch(batch.loss_rows.get(), batch.correct_rows.get(), n, stats.batch_loss.get(),
                           stats.loss_sum.get(), stats.correct.get(), gpu.stream());
          net.backward(gpu, batch.x.get(), batch.dlogits.get(), n);
          sgd(params.values(), params.grads(), params.momenta(), static_cast<int64_t>(params.trainable_floats()),
              lr, momentum, weight_decay, gpu.stream());
        });
        timer.stop();
        stats.samples += n;
        if (log_steps) {
          float loss = 0;
          CUDA_CHECK(cudaMemcpyAsync(&loss, stats.batch_loss.get(), sizeof loss, cudaMemcpyDeviceToHost,
                                     gpu.stream()),
                     "step loss");
          gpu.synchronize("step loss");
          Record("step").add("epoch", epoch).add("step", step).add("loss", static_cast<double>(loss)).emit();
        }
      }
      emit_phase(gpu, epoch, "train", stats, timer, phase);
    }
    {  // eval
      stats.reset(gpu);
      StepTimer timer(true, gpu.stream());
      Phase phase;
      for (int64_t start = 0; start < test.count; start += eval_batch_size) {
        const int n = static_cast<int>(std::min(eval_batch_size, test.count - start));
        batch.gather(test, test_indices.data() + start, n);
        timer.start();
        batch.upload(gpu, n);
        eval_steps.run(gpu, n, [&] {
          normalise(gpu, batch.images_dev.get(), batch.x.get(), n, hw);
          const float* logits = net.forward(gpu, batch.x.get(), n, false);
          softmax_cross_entropy(logits, batch.labels_dev.get(), n, classes, batch.loss_rows.get(),
                                batch.correct_rows.get(), nullptr, gpu.stream());
          accumulate_batch(batch.loss_rows.get(), batch.correct_rows.get(), n, stats.batch_loss.get(),
                           stats.loss_sum.get(), stats.correct.get(), gpu.stream());
        });
        timer.stop();
        stats.samples += n;
      }
      emit_phase(gpu, epoch, "eval", stats, timer, phase);
    }
  }
  if (!save_path.empty()) write_weights(save_path, params.save());
  return 0;
}

}  // namespace ac::cudnn
