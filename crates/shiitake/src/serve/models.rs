//! Which model `serve` gives Sessions that state no preference.
//!
//! `--model` (or `SHIITAKE_MODEL`) takes a spec (`docs/models.md`), or:
//!
//! - nothing, or `local`: the bundled local model, started (and on a first
//!   run built) by `shiitake-local-model`, and stopped again when `serve`
//!   stops if `serve` started it; `local:gemma3` picks other weights;
//! - `none`: no default model, so runs of Sessions without a preference fail
//!   with a diagnostic that says how to configure one.
//!
//! A Session may choose another model only among those the host allows
//! ([`AllowedModels`]): a spec names a file (`scripted:`) or a host to send the
//! transcript and a key to (`openai-compatible:`), so an open choice would let
//! any caller with the token read files or exfiltrate keys.

use std::collections::BTreeSet;
use std::sync::Arc;

use shiitake_core::{ModelResolver, OfferedTools, SpecResolver, ToolSet};
use shiitake_local_model::{Cache, DEFAULT_PORT, Weights};
use shiitake_model::{Model, ModelEnv};
use shiitake_protocol::ModelPreference;

use crate::error::CliError;

/// The tools runs offer (`--tools`): with no flag, each profile's default (everything
/// to full models, the file tools and question to small ones such as the bundled model);
/// with one, that set for every model.
pub fn offered_tools(argument: Option<&str>) -> Result<OfferedTools, CliError> {
    match argument {
        None => Ok(OfferedTools::default()),
        Some(list) => ToolSet::parse(list)
            .map(OfferedTools::every_profile)
            .map_err(|error| CliError::Setup(format!("--tools {list:?}: {error}"))),
    }
}

/// The start-up line's account of the tools offered.
pub fn describe_offered(offered: &OfferedTools) -> String {
    if offered.full == offered.small {
        format!("{} (every model; --tools)", offered.full)
    } else {
        format!(
            "{} to full models, {} to small ones such as the bundled model (--tools LIST to choose)",
            offered.full, offered.small
        )
    }
}

/// What `--model` asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelChoice {
    /// A model spec such as `openai:gpt-4o-mini`.
    Spec(String),
    /// The bundled local model with these weights.
    Local(Weights),
    /// No default model.
    None,
}

impl ModelChoice {
    /// Reads `--model`; an unknown `local:` weights name is an error naming the known ones.
    pub fn parse(argument: Option<&str>) -> Result<Self, CliError> {
        let Some(argument) = argument.map(str::trim) else {
            return Ok(ModelChoice::Local(Weights::default()));
        };
        match argument {
            "" | "local" => Ok(ModelChoice::Local(Weights::default())),
            "none" => Ok(ModelChoice::None),
            other => match other.strip_prefix("local:") {
                Some(alias) => Weights::from_alias(alias)
                    .map(ModelChoice::Local)
                    .ok_or_else(|| {
                        let known: Vec<&str> = Weights::ALL.iter().map(|w| w.alias()).collect();
                        CliError::Setup(format!(
                            "--model local:{alias}: the bundled weights are {}",
                            known.join(", ")
                        ))
                    }),
                None => Ok(ModelChoice::Spec(other.to_owned())),
            },
        }
    }
}

/// The bundled model `serve` started, to stop when `serve` stops.
pub struct StartedLocal {
    cache: Cache,
}

impl StartedLocal {
    /// Stops the server (on a blocking thread: it waits for the process to end).
    pub async fn stop(self) {
        let stopped = tokio::task::spawn_blocking(move || {
            shiitake_local_model::stop(&self.cache, DEFAULT_PORT)
        })
        .await;
        match stopped {
            Ok(Ok(_)) => println!("shiitake: stopped the bundled local model"),
            Ok(Err(error)) => eprintln!("shiitake: stopping the bundled local model: {error}"),
            Err(error) => eprintln!("shiitake: stopping the bundled local model: {error}"),
        }
    }
}

/// Starts (or reuses) the bundled model; returns its spec and, when this call started it, the handle to stop it.
pub async fn start_local(weights: Weights) -> Result<(String, Option<StartedLocal>), CliError> {
    let cache = Cache::from_env().map_err(|error| CliError::Setup(error.to_string()))?;
    let reused = shiitake_local_model::healthy(DEFAULT_PORT);
    if reused {
        println!("shiitake: using the bundled local model already running on port {DEFAULT_PORT}");
    } else {
        println!(
            "shiitake: no model given (--model or SHIITAKE_MODEL), so starting the bundled local model, \
             {weights}, on port {DEFAULT_PORT}; the first start builds it into {} (minutes)",
            cache.root().display()
        );
    }
    let task_cache = cache.clone();
    let url = tokio::task::spawn_blocking(move || {
        shiitake_local_model::start(&task_cache, weights, DEFAULT_PORT)
    })
    .await
    .map_err(|error| CliError::Setup(format!("the bundled local model: {error}")))?
    .map_err(|error| {
        CliError::Setup(format!(
            "the bundled local model could not start ({error}); pass --model SPEC to use \
             another model (see docs/models.md)"
        ))
    })?;
    let spec = shiitake_local_model::spec(&url, weights);
    let started = (!reused).then_some(StartedLocal { cache });
    Ok((spec, started))
}

/// The models a Session may choose: exact specs the host named (`--model`,
/// `--allow-model`), and any model of a provider whose API key the host holds
/// (`openai:`, `anthropic:`), which goes only to that provider's configured URL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedModels {
    exact: BTreeSet<String>,
    providers: BTreeSet<&'static str>,
}

impl AllowedModels {
    /// The allowlist of `specs` and the providers whose keys `env` holds.
    pub fn new<'a>(specs: impl IntoIterator<Item = &'a String>, env: &ModelEnv) -> Self {
        let exact = specs
            .into_iter()
            .map(|spec| spec.trim().to_owned())
            .collect();
        let mut providers = BTreeSet::new();
        if env.openai_api_key.is_some() {
            providers.insert("openai");
        }
        if env.anthropic_api_key.is_some() {
            providers.insert("anthropic");
        }
        Self { exact, providers }
    }

    /// Whether a Session may choose `spec`.
    pub fn permits(&self, spec: &str) -> bool {
        let spec = spec.trim();
        self.exact.contains(spec)
            || spec.split_once(':').is_some_and(|(provider, model)| {
                self.providers.contains(provider) && !model.trim().is_empty()
            })
    }

    /// What may be chosen, for the refusal.
    fn describe(&self) -> String {
        let mut allowed: Vec<String> = self.exact.iter().cloned().collect();
        allowed.extend(
            self.providers
                .iter()
                .map(|provider| format!("{provider}:<model>")),
        );
        if allowed.is_empty() {
            "none".to_owned()
        } else {
            allowed.join(", ")
        }
    }
}

/// Resolves Session preferences by spec, with the `--model none` diagnostic of this CLI,
/// and refuses preferences outside the host's [`AllowedModels`].
pub struct ServeModels {
    specs: SpecResolver,
    allowed: AllowedModels,
}

impl ServeModels {
    /// Sessions without a preference get `default_spec`; Sessions may choose among `allowed`.
    pub fn new(default_spec: Option<String>, allowed: AllowedModels) -> Self {
        Self {
            specs: SpecResolver {
                default_spec,
                env: ModelEnv::from_env(),
            },
            allowed,
        }
    }

    /// `scripted:` models keep their place in their scripts under `dir`, so a script
    /// plays on across a Session's runs and across restarts (`docs/models.md`), instead
    /// of from its first turn on every run.
    #[must_use]
    pub fn keeping_script_places_in(mut self, dir: std::path::PathBuf) -> Self {
        self.specs.env.scripted_places = Some(dir);
        self
    }
}

/// What a run without a model says.
pub const NO_MODEL: &str = "no model is configured (serve runs with --model none): restart \
    `shiitake serve` with no --model for the bundled local model, or with --model SPEC or \
    SHIITAKE_MODEL set, for example openai:gpt-4o-mini (see docs/models.md)";

impl ModelResolver for ServeModels {
    fn resolve(&self, preference: Option<&ModelPreference>) -> Result<Arc<dyn Model>, String> {
        if preference.is_none() && self.specs.default_spec.is_none() {
            return Err(NO_MODEL.to_owned());
        }
        if let Some(preference) = preference {
            self.permits(preference)?;
        }
        self.specs.resolve(preference)
    }

    fn permits(&self, preference: &ModelPreference) -> Result<(), String> {
        let spec = preference.model.as_str();
        if self.allowed.permits(spec) {
            return Ok(());
        }
        Err(format!(
            "this host does not offer the model {spec:?}; a Session may choose {} (the host \
             adds models with `shiitake serve --allow-model SPEC`)",
            self.allowed.describe()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_arguments_choose_local_none_or_a_spec() {
        let local = ModelChoice::Local(Weights::default());
        assert_eq!(ModelChoice::parse(None).ok(), Some(local.clone()));
        assert_eq!(ModelChoice::parse(Some("local")).ok(), Some(local));
        assert_eq!(
            ModelChoice::parse(Some("local:gemma3")).ok(),
            Some(ModelChoice::Local(Weights::Gemma3))
        );
        assert_eq!(
            ModelChoice::parse(Some("none")).ok(),
            Some(ModelChoice::None)
        );
        assert_eq!(
            ModelChoice::parse(Some("openai:gpt-4o-mini")).ok(),
            Some(ModelChoice::Spec("openai:gpt-4o-mini".into()))
        );
        let error = ModelChoice::parse(Some("local:llama"))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("--model local:llama: the bundled weights are smollm2, gemma3")
        );
    }

    #[test]
    fn tools_flag_names_one_set_for_every_model_and_none_keeps_the_profiles() {
        use shiitake_model::ModelProfile;
        let default = offered_tools(None).ok();
        assert_eq!(default, Some(OfferedTools::default()));
        assert_eq!(
            default.as_ref().map(describe_offered).as_deref(),
            Some(
                "all to full models, files,question to small ones such as the bundled model \
                 (--tools LIST to choose)"
            )
        );
        let named = offered_tools(Some("files,question,agents.create")).ok();
        let small = named
            .as_ref()
            .map(|o| o.for_profile(ModelProfile::Small).to_string());
        assert_eq!(small.as_deref(), Some("agents.create,files,question"));
        assert_eq!(
            named
                .as_ref()
                .map(|o| o.for_profile(ModelProfile::Full).to_string()),
            small
        );
        let error = offered_tools(Some("files,,x")).err().map(|e| e.to_string());
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.starts_with("--tools \"files,,x\": ")),
            "{error:?}"
        );
    }

    #[test]
    fn the_allowlist_holds_named_specs_and_keyed_providers_only() {
        let named = vec![
            "scripted:/tmp/s.json".to_owned(),
            " openai-compatible:http://127.0.0.1:8090/v1#m ".to_owned(),
        ];
        let keyed = ModelEnv {
            openai_api_key: Some("k".into()),
            ..ModelEnv::default()
        };
        let allowed = AllowedModels::new(&named, &keyed);
        for spec in [
            "scripted:/tmp/s.json",
            "openai-compatible:http://127.0.0.1:8090/v1#m",
            "openai:gpt-4o",
        ] {
            assert!(allowed.permits(spec), "{spec}");
        }
        for spec in [
            "scripted:/etc/passwd",
            "scripted:/tmp/s.json2",
            "openai-compatible:http://evil.invalid/v1#m",
            "openai:",
            "anthropic:claude-sonnet-4-5",
            "openai",
        ] {
            assert!(!allowed.permits(spec), "{spec}");
        }
        let unkeyed = AllowedModels::new(&named, &ModelEnv::default());
        assert!(!unkeyed.permits("openai:gpt-4o"));
    }

    #[test]
    fn without_a_model_the_diagnostic_says_how_to_configure_one() {
        let models = ServeModels::new(None, AllowedModels::default());
        let error = models.resolve(None).err().unwrap_or_default();
        for needed in [
            "--model",
            "SHIITAKE_MODEL",
            "docs/models.md",
            "bundled local model",
        ] {
            assert!(error.contains(needed), "{needed}: {error}");
        }
    }
}
