export type {
  GroupConfig,
  GroupRule,
  HotTenantConfig,
  MemberConfig,
  RuleCondition,
  RuleValue,
  ShardSelectorConfig,
} from "./config.js";
export {
  InvalidPropertiesError,
  InvalidRoutingKeyError,
  InvalidScorecardInputError,
  InvalidSelectorConfigError,
  isShardkitError,
  MissingRoutingKeyError,
  NoGroupMatchError,
  SelectorError,
  type SelectorErrorByCode,
  type SelectorErrorCode,
} from "./errors.js";
export {
  type GroupOfShards,
  type GroupsFromShardsOptions,
  groupsFromShards,
  type ShardOfGroup,
} from "./groups-from-shards.js";
export {
  analyzeShardKey,
  type ShardKeyAnalysisOptions,
  type ShardKeySample,
  type ShardKeyScorecard,
  type ShardKeyTopEntry,
} from "./scorecard.js";
export {
  createShardSelector,
  type GroupChoice,
  type MemberChoice,
  type SelectionExplanation,
  type ShardSelector,
} from "./selector.js";
