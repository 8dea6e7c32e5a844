// Types of the two KServe resources deploy/kserve uses, written for this project from
// KServe's API: the Go types (pkg/apis/serving/v1alpha1/servingruntime_types.go,
// pkg/apis/serving/v1beta1/{predictor,component,predictor_model,podspec}.go) and the CRDs
// generated from them (config/crd/full/serving.kserve.io_{servingruntimes,inferenceservices}.yaml)
// as of KServe v0.20. No npm package carries KServe's schemas (the kubernetes-models family
// has none), so validate.mjs type-checks the manifests against these interfaces with
// TypeScript: a misspelt or misplaced field, a wrong type, or a missing required field is an
// error. Embedded Kubernetes types (Container, Volume, PodSpec fields, ObjectMeta) are
// kubernetes-models' own, and validate.mjs also runs their JSON-schema validation on
// those parts (its PREDICTOR_KSERVE_KEYS / MODEL_KSERVE_KEYS list the keys KServe adds).
//
// Stricter than the CRD in two documented places: `metadata` and `spec` are required, and
// `predictor.model.modelFormat` is required (the CRD leaves them optional; KServe's webhook
// refuses a model without a format it can match to a runtime). Fields this project never
// writes (canary, explainer, transformer, workerSpec, autoScaling) are typed `unknown`: they
// are accepted as present but not checked.
import type { IObjectMeta } from "@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta";
import type { IAffinity } from "kubernetes-models/v1/Affinity";
import type { IContainer } from "kubernetes-models/v1/Container";
import type { IEnvVar } from "kubernetes-models/v1/EnvVar";
import type { ILocalObjectReference } from "kubernetes-models/v1/LocalObjectReference";
import type { IPodResourceClaim } from "kubernetes-models/v1/PodResourceClaim";
import type { IPodSpec } from "kubernetes-models/v1/PodSpec";
import type { IToleration } from "kubernetes-models/v1/Toleration";
import type { IVolume } from "kubernetes-models/v1/Volume";

// constants.InferenceServiceProtocol
export type ProtocolVersion = "v1" | "v2" | "grpc-v1" | "grpc-v2";

// ---- serving.kserve.io/v1alpha1 ServingRuntime --------------------------------------------

export interface ISupportedModelFormat {
  name: string;
  version?: string;     // "major", "major.minor" or "major.minor.patch"
  autoSelect?: boolean;
  priority?: number;    // >= 1; used with autoSelect
}

export interface IBuiltInAdapter {
  serverType?: string;
  runtimeManagementPort?: number;
  memBufferBytes?: number;
  modelLoadingTimeoutMillis?: number;
  env?: IEnvVar[];
}

export interface IServingRuntimeSpec {
  supportedModelFormats?: ISupportedModelFormat[];
  multiModel?: boolean;
  disabled?: boolean;
  protocolVersions?: ProtocolVersion[];
  workerSpec?: unknown;
  // ServingRuntimePodSpec (inline)
  containers: IContainer[];
  volumes?: IVolume[];
  nodeSelector?: { [key: string]: string };
  affinity?: IAffinity;
  tolerations?: IToleration[];
  labels?: { [key: string]: string };
  annotations?: { [key: string]: string };
  imagePullSecrets?: ILocalObjectReference[];
  hostIPC?: boolean;
  resourceClaims?: IPodResourceClaim[];
  schedulerName?: string;
  // ModelMesh fields
  grpcEndpoint?: string;
  grpcDataEndpoint?: string;
  httpDataEndpoint?: string;
  replicas?: number;
  storageHelper?: { disabled?: boolean };
  builtInAdapter?: IBuiltInAdapter;
}

export interface IServingRuntime {
  apiVersion: "serving.kserve.io/v1alpha1";
  kind: "ServingRuntime" | "ClusterServingRuntime";
  metadata: IObjectMeta;
  spec: IServingRuntimeSpec;
}

// ---- serving.kserve.io/v1beta1 InferenceService ------------------------------------------

export interface IStorageSpec {
  path?: string;
  schemaPath?: string;
  parameters?: { [key: string]: string };
  key?: string;
}

// PredictorExtensionSpec: a container (name optional) plus where the model is stored.
export type IPredictorExtensionSpec = Omit<IContainer, "name"> & {
  name?: string;
  storageUri?: string;
  runtimeVersion?: string;
  protocolVersion?: ProtocolVersion;
  storage?: IStorageSpec;
  confidential?: { enabled: boolean; resourceId?: string };
};

export type IModelSpec = IPredictorExtensionSpec & {
  modelFormat: { name: string; version?: string };
  runtime?: string;
};

export interface IComponentExtensionSpec {
  minReplicas?: number;
  maxReplicas?: number;
  scaleTarget?: number;
  scaleMetric?: "cpu" | "memory" | "concurrency" | "rps";
  scaleMetricType?: "Utilization" | "Value" | "AverageValue";
  autoScaling?: unknown;
  containerConcurrency?: number;
  timeout?: number;
  canaryTrafficPercent?: number;
  logger?: {
    url?: string;
    mode?: "all" | "request" | "response";
    metadataHeaders?: string[];
    metadataAnnotations?: string[];
  };
  batcher?: { maxBatchSize?: number; maxLatency?: number; timeout?: number };
  labels?: { [key: string]: string };
  annotations?: { [key: string]: string };
  deploymentStrategy?: { type?: string; rollingUpdate?: { maxSurge?: number | string; maxUnavailable?: number | string } };
  storageUris?: Array<{ uri: string; mountPath?: string }>;
  storageContainerName?: string;
}

// PredictorSpec: the Pod's fields inline (containers optional), the component extension,
// one of the model / framework specs.
export type IPredictorSpec = Omit<IPodSpec, "containers"> &
  IComponentExtensionSpec & {
    containers?: IContainer[];
    name?: string;
    model?: IModelSpec;
    workerSpec?: unknown;
    sklearn?: IPredictorExtensionSpec;
    xgboost?: IPredictorExtensionSpec;
    tensorflow?: IPredictorExtensionSpec;
    pytorch?: IPredictorExtensionSpec;
    triton?: IPredictorExtensionSpec;
    onnx?: IPredictorExtensionSpec;
    huggingface?: IPredictorExtensionSpec;
    pmml?: IPredictorExtensionSpec;
    lightgbm?: IPredictorExtensionSpec;
    paddle?: IPredictorExtensionSpec;
  };

export interface IInferenceService {
  apiVersion: "serving.kserve.io/v1beta1";
  kind: "InferenceService";
  metadata: IObjectMeta;
  spec: {
    predictor: IPredictorSpec;
    explainer?: unknown;
    transformer?: unknown;
    canary?: unknown;
  };
}
