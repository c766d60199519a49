"""Three camera streams each run a ResNet-50 (torchvision's, else a small
convolutional stand-in) on their own frame and copy the logits into one
shared tensor; the default stream post-processes them. The racy variant's
loop waits for two of the three camera streams (a wrong loop bound), the
fixed one for all three. 60 iterations: a long trace with one missing
wait. Each iteration calls ``dagrun_torch.step()``, which a bounded
recording (``max_iterations``) counts."""
import sys

import torch

import dagrun_torch
from common import main

VARIANTS = ("racy", "fixed")
ITERATIONS = 60
CAMERAS = 3


def model():
    try:
        import torchvision
        return torchvision.models.resnet50().cuda().eval()
    except ImportError:
        return torch.nn.Sequential(torch.nn.Conv2d(3, 64, 7, 2, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                   torch.nn.Flatten(), torch.nn.Linear(64, 1000)).cuda().eval()


def run(variant, c, net=None):
    net = net or model()
    streams = [torch.cuda.Stream() for _ in range(CAMERAS)]
    frames = [torch.randn(1, 3, 224, 224, device="cuda") for _ in range(CAMERAS)]
    logits = torch.empty(CAMERAS, 1000, device="cuda")
    results = []
    with torch.no_grad():
        for it in range(ITERATIONS):
            dagrun_torch.step()                            # an iteration begins (for a bounded recording)
            for s in streams:
                s.wait_stream(torch.cuda.current_stream())
            for cam, s in enumerate(streams):
                with torch.cuda.stream(s):
                    logits[cam].copy_(net(frames[cam])[0])
            wait_for = CAMERAS if variant == "fixed" else CAMERAS - 1
            for s in streams[:wait_for]:
                torch.cuda.current_stream().wait_stream(s)
            results.append(torch.softmax(logits, dim=1).argmax(dim=1))
    torch.cuda.synchronize()
    return len(results) == ITERATIONS


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS))
