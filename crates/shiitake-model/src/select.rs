//! Choosing a model from a spec string such as `anthropic:claude-sonnet-4-5`.

use std::path::PathBuf;
use std::sync::Arc;

use crate::anthropic::{Anthropic, AnthropicConfig};
use crate::error::ModelError;
use crate::model::Model;
use crate::openai::{OpenAiCompatible, OpenAiConfig, ToolStreaming};
use crate::profile::ModelProfile;
use crate::scripted::place::place_file;
use crate::scripted::{Script, ScriptError, ScriptedModel};

/// The environment a spec is resolved against: keys and base URLs.
///
/// [`ModelEnv::from_env`] reads the variables named on each field; tests build
/// one by hand.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ModelEnv {
    /// `OPENAI_API_KEY`, needed by `openai:`.
    pub openai_api_key: Option<String>,
    /// `OPENAI_BASE_URL`, replaces `https://api.openai.com/v1` for `openai:`.
    pub openai_base_url: Option<String>,
    /// `ANTHROPIC_API_KEY`, needed by `anthropic:`.
    pub anthropic_api_key: Option<String>,
    /// `ANTHROPIC_BASE_URL`, replaces `https://api.anthropic.com` for `anthropic:`.
    pub anthropic_base_url: Option<String>,
    /// `OPENAI_COMPATIBLE_API_KEY`, sent by `openai-compatible:` when set.
    pub openai_compatible_api_key: Option<String>,
    /// Where `scripted:<path>` models keep their place in their scripts, one file per
    /// script (serve: `<data-dir>/scripted`): every model built from a script plays on
    /// where the last left off, across runs and restarts. `None` keeps each model's
    /// place in memory, so a model built per run starts at the first turn.
    pub scripted_places: Option<PathBuf>,
}

impl std::fmt::Debug for ModelEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = |value: &Option<String>| if value.is_some() { "<set>" } else { "<unset>" };
        f.debug_struct("ModelEnv")
            .field("openai_api_key", &set(&self.openai_api_key))
            .field("openai_base_url", &self.openai_base_url)
            .field("anthropic_api_key", &set(&self.anthropic_api_key))
            .field("anthropic_base_url", &self.anthropic_base_url)
            .field(
                "openai_compatible_api_key",
                &set(&self.openai_compatible_api_key),
            )
            .field("scripted_places", &self.scripted_places)
            .finish()
    }
}

impl ModelEnv {
    /// Reads the variables from the process environment; empty values count as unset.
    pub fn from_env() -> Self {
        let var = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|value| !value.trim().is_empty())
        };
        Self {
            openai_api_key: var("OPENAI_API_KEY"),
            openai_base_url: var("OPENAI_BASE_URL"),
            anthropic_api_key: var("ANTHROPIC_API_KEY"),
            anthropic_base_url: var("ANTHROPIC_BASE_URL"),
            openai_compatible_api_key: var("OPENAI_COMPATIBLE_API_KEY"),
            scripted_places: None,
        }
    }
}

/// A spec that names no usable model.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    /// The spec is not `<provider>:<rest>` with a known provider.
    #[error(
        "unknown model spec `{0}`: use openai:<model>, anthropic:<model>, \
         openai-compatible:<base-url>#<model> or scripted:<path>"
    )]
    Unknown(String),
    /// The spec has the right provider but a malformed rest.
    #[error("model spec `{spec}`: {reason}")]
    Malformed {
        /// The spec as given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// A required key is not set.
    #[error("{spec} needs {variable}: set it in the environment (see docs/models.md)")]
    MissingKey {
        /// The spec as given.
        spec: String,
        /// The environment variable to set.
        variable: &'static str,
    },
    /// The script of `scripted:<path>` could not be loaded.
    #[error("model spec `scripted:{}`: {source}", path.display())]
    Script {
        /// The script file.
        path: PathBuf,
        /// Why it could not be used.
        source: ScriptError,
    },
    /// The provider rejected its configuration (a bad URL or header).
    #[error("model spec `{spec}`: {source}")]
    Config {
        /// The spec as given.
        spec: String,
        /// The provider's complaint.
        source: ModelError,
    },
}

/// Builds the model a spec names.
///
/// | spec | model |
/// | --- | --- |
/// | `openai:<model>` | OpenAI (needs `OPENAI_API_KEY`; `OPENAI_BASE_URL` optional) |
/// | `anthropic:<model>` | Anthropic (needs `ANTHROPIC_API_KEY`; `ANTHROPIC_BASE_URL` optional) |
/// | `openai-compatible:<base-url>#<model>[?option=value&…]` | any OpenAI-compatible server (Ollama, llama.cpp, vLLM) |
/// | `scripted:<path>` | the scripted model playing a JSON script file |
/// | any of them + `?profile=small` | the same model, offered what a small model gets |
///
/// Any spec may end with `?profile=full|small` ([`ModelProfile`]): `small` gives the
/// model the compact tool set and short prompt of small models. `openai-compatible:`
/// also takes `tool_streaming=streaming|replay` ([`ToolStreaming`](crate::ToolStreaming)):
/// `replay` for servers that cannot stream tool calls. Options are joined with `&`.
pub fn select(spec: &str, env: &ModelEnv) -> Result<Arc<dyn Model>, SelectError> {
    let spec = spec.trim();
    let Some((provider, rest)) = spec.split_once(':') else {
        return Err(SelectError::Unknown(spec.to_owned()));
    };
    let malformed = |reason: &str| SelectError::Malformed {
        spec: spec.to_owned(),
        reason: reason.to_owned(),
    };
    let config_error = |source| SelectError::Config {
        spec: spec.to_owned(),
        source,
    };
    match provider {
        "openai" => {
            let (rest, options) = split_options(rest);
            let options =
                SpecOptions::parse(options, false).map_err(|reason| malformed(&reason))?;
            if rest.is_empty() {
                return Err(malformed("name the model, as in openai:gpt-4o"));
            }
            let key = env
                .openai_api_key
                .clone()
                .ok_or_else(|| SelectError::MissingKey {
                    spec: spec.to_owned(),
                    variable: "OPENAI_API_KEY",
                })?;
            let mut config = OpenAiConfig::openai(rest, key).profile(options.profile);
            if let Some(base) = &env.openai_base_url {
                config.base_url.clone_from(base);
            }
            Ok(Arc::new(
                OpenAiCompatible::new(config).map_err(config_error)?,
            ))
        }
        "anthropic" => {
            let (rest, options) = split_options(rest);
            let options =
                SpecOptions::parse(options, false).map_err(|reason| malformed(&reason))?;
            if rest.is_empty() {
                return Err(malformed(
                    "name the model, as in anthropic:claude-sonnet-4-5",
                ));
            }
            let key = env
                .anthropic_api_key
                .clone()
                .ok_or_else(|| SelectError::MissingKey {
                    spec: spec.to_owned(),
                    variable: "ANTHROPIC_API_KEY",
                })?;
            let mut config = AnthropicConfig::new(rest, key).profile(options.profile);
            if let Some(base) = &env.anthropic_base_url {
                config.base_url.clone_from(base);
            }
            Ok(Arc::new(Anthropic::new(config).map_err(config_error)?))
        }
        "openai-compatible" => {
            let Some((base, model)) = rest.rsplit_once('#') else {
                return Err(malformed(
                    "write openai-compatible:<base-url>#<model>, as in \
                     openai-compatible:http://127.0.0.1:11434/v1#llama3.2",
                ));
            };
            let (model, options) = model.split_once('?').unwrap_or((model, ""));
            if base.is_empty() || model.is_empty() {
                return Err(malformed(
                    "both the base URL and the model after `#` are needed",
                ));
            }
            let options = SpecOptions::parse(options, true).map_err(|reason| malformed(&reason))?;
            let mut config = OpenAiConfig::new(base, model)
                .profile(options.profile)
                .tool_streaming(options.tool_streaming);
            config.api_key.clone_from(&env.openai_compatible_api_key);
            Ok(Arc::new(
                OpenAiCompatible::new(config).map_err(config_error)?,
            ))
        }
        "scripted" => {
            let (rest, options) = split_options(rest);
            let options =
                SpecOptions::parse(options, false).map_err(|reason| malformed(&reason))?;
            if rest.is_empty() {
                return Err(malformed(
                    "name the script file, as in scripted:tests/script.json",
                ));
            }
            let path = PathBuf::from(rest);
            let script = Script::load(&path).map_err(|source| SelectError::Script {
                path: path.clone(),
                source,
            })?;
            let model = ScriptedModel::new(script).with_profile(options.profile);
            Ok(Arc::new(match &env.scripted_places {
                Some(places) => model.keeping_place_in(place_file(places, &path)),
                None => model,
            }))
        }
        _ => Err(SelectError::Unknown(spec.to_owned())),
    }
}

/// The rest of a spec before its `?options`, and the options: the text after the last
/// `?` when it holds a `key=value` (so a `?` elsewhere in a path or model stays).
fn split_options(rest: &str) -> (&str, &str) {
    match rest.rsplit_once('?') {
        Some((before, options)) if options.contains('=') => (before, options),
        _ => (rest, ""),
    }
}

/// The `key=value&…` options a spec ends with.
#[derive(Debug, Default, PartialEq, Eq)]
struct SpecOptions {
    profile: ModelProfile,
    tool_streaming: ToolStreaming,
}

impl SpecOptions {
    /// Reads `options`; `tool_streaming` is an option of `openai-compatible:` only.
    fn parse(options: &str, openai_compatible: bool) -> Result<Self, String> {
        let known = if openai_compatible {
            "profile=full|small and tool_streaming=streaming|replay"
        } else {
            "profile=full|small"
        };
        let mut parsed = Self::default();
        for option in options.split('&').filter(|option| !option.is_empty()) {
            let (key, value) = option
                .split_once('=')
                .ok_or_else(|| format!("option `{option}` needs a value, as in profile=small"))?;
            match key {
                "profile" => parsed.profile = value.parse()?,
                "tool_streaming" if openai_compatible => parsed.tool_streaming = value.parse()?,
                other => {
                    return Err(format!(
                        "unknown option `{other}` (the options are {known})"
                    ));
                }
            }
        }
        Ok(parsed)
    }
}
