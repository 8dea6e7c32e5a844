// Types of a prometheus-adapter configuration (its --config file) and of the parts of the
// prometheus-community/prometheus-adapter Helm chart's values that carry rules, written for
// this project from the adapter's configuration reference (docs/config.md: discovery via
// seriesQuery/seriesFilters, association via resources, naming via name.matches/as,
// querying via metricsQuery) and the chart's values (prometheus.url/port/path,
// rules.default/custom/external/resource/existing). validate.mjs type-checks
// deploy/kubernetes/prometheus-adapter against these.

export interface IResourceOverride {
  group?: string;
  resource: string;
}

export interface IAdapterRule {
  seriesQuery: string;
  seriesFilters?: Array<{ is?: string; isNot?: string }>;
  resources?: {
    overrides?: { [label: string]: IResourceOverride };
    template?: string;
    namespaced?: boolean;
  };
  name?: { matches?: string; as?: string };
  metricsQuery: string;
}

export interface IAdapterConfig {
  rules?: IAdapterRule[];
  externalRules?: IAdapterRule[];
  resourceRules?: unknown;
}

export interface IAdapterHelmValues {
  prometheus?: { url?: string; port?: number; path?: string };
  rules?: {
    default?: boolean;
    custom?: IAdapterRule[];
    external?: IAdapterRule[];
    resource?: unknown;
    existing?: string;
  };
  // The chart's other values (image, replicas, resources, ...) are not checked.
  [value: string]: unknown;
}
