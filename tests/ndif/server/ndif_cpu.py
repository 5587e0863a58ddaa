"""An NDIF 0.1.2 server on a machine without a GPU, for `make test-ndif` only (never part of attnwidget).

NDIF is chosen through its own settings to use the two classes here (tests/ndif/stack.sh sets them):
- ``NDIF_CONTROLLER_IMPORT_PATH=ndif_cpu.Controller``: ndif's controller, which first lets nnsight 0.8.1's
  ``describe_checkpoint`` and ``max_tp_size`` take the ``trust_remote_code`` argument every ndif 0.1.x passes
  (nnsight 0.8.1 no longer takes it; the checkpoint is described the same way without it), and describes a
  model saved in a local folder from its files: nnsight asks the Hub for its size, which a folder is not on,
  and then builds it on the meta device, where nnsight 0.8.1 finds no tokenizer for a text-generation
  pipeline of transformers 5.25.
- ``NDIF_MODEL_IMPORT_PATH=ndif_cpu.ModelActor``: ndif's model actor, loading the model on the CPU and
  leaving out its CUDA calls (synchronise, empty the cache, cap and check the GPU placement).
The controller places models only on Ray nodes that declare a GPU: the head declares one (``--num-gpus=1``),
which nothing here ever touches.

Runs in the server's own virtualenv (.venv-ndif, Python 3.12), on this directory's path.
"""

import gc
import json
import math
import pathlib

import ray
from ndif.services.ray.deployments.controller.controller import _ControllerActor
from ndif.services.ray.deployments.modeling.base import BaseModelDeployment
from nnsight.modeling.huggingface import HuggingFaceModel
from nnsight.modeling.mixins.remotable import CheckpointInfo, Remotable, bytes_per_element


def _folder(model_key: str):
    """The local folder ``model_key`` names, or None (a Hub repository, or no folder there)."""
    try:
        folder = pathlib.Path(json.loads(model_key.split(":", 1)[1])["repo_id"])
    except (IndexError, KeyError, TypeError, ValueError):
        return None
    return folder if folder.is_absolute() and (folder / "config.json").is_file() else None


def _describe(describe):
    def described(cls, model_key, dtype, trust_remote_code=False):
        folder = _folder(model_key)
        if folder is None:
            return describe(cls, model_key, dtype)
        from transformers import AutoConfig

        # float32 weights on disk: four bytes a parameter
        n = sum(f.stat().st_size for f in folder.glob("*.safetensors")) // 4
        config = AutoConfig.from_pretrained(folder)
        return CheckpointInfo(size_bytes=math.ceil(n * bytes_per_element(dtype)), n_params=n, config=config)

    return classmethod(described)


def _max_tp_size(max_tp_size):
    def sized(cls, model_key, trust_remote_code=False):
        return max_tp_size(cls, model_key)

    return classmethod(sized)


def shim_nnsight() -> None:
    Remotable.describe_checkpoint = _describe(Remotable.describe_checkpoint.__func__)
    Remotable.max_tp_size = _max_tp_size(Remotable.max_tp_size.__func__)


@ray.remote(num_cpus=1, num_gpus=0, max_restarts=-1, resources={"head": 1})
class Controller(_ControllerActor):
    def __init__(self, *args, **kwargs):
        shim_nnsight()
        super().__init__(*args, **kwargs)


@ray.remote(num_cpus=1, max_restarts=-1)
class ModelActor(BaseModelDeployment):
    """ndif's model actor with the model on the CPU, in the dtype the controller asks for."""

    def load_from_disk(self) -> HuggingFaceModel:
        model = HuggingFaceModel.from_model_key(self.model_key, dispatch=True, dtype=self.dtype_name, **self.kwargs)
        model._module.requires_grad_(False)
        return model

    async def to_cache(self) -> None:
        await self.cancel("preempted")
        self.cached = True

    def from_cache(self, gpu_mem_bytes_by_id) -> None:
        self.gpu_mem_bytes_by_id = gpu_mem_bytes_by_id
        self.cached = False

    def cleanup(self) -> None:
        self.kill_switch.clear()
        self.kill_reason = None
        self.execution_ident = None
        self.model.interleaver.cancel()
        gc.collect()
