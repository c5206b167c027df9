import { fileURLToPath } from "node:url";
import { describePublishedPackage } from "@shardkit/vitest-config/published";
import { expect } from "vitest";

describePublishedPackage(fileURLToPath(new URL("..", import.meta.url)), {
  readme: {
    "examples/select.mjs": (lines) => {
      expect(lines).toHaveLength(6);
      expect(lines[0]).toMatch(
        /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12} is on shard 1\/0$/,
      );
      expect(lines.slice(1)).toEqual([
        'shard 1/0: group 1 "mx-onshore" by rule 0 "mx-bank" (region = "MX", regulatoryClass = "bank"); member 0 of [0, 1, 3] by rendezvous hash of tenantId "tenant-42" (murmur3 0xaca623b6); draining, skipped: [2]',
        'shard 0/1: group 0 "us" by rule 1 "us" (region in ["US", "PR"]); member 1 of [0, 1, 2, 3] by rendezvous hash of tenantId "tenant-7" (murmur3 0x3d20cd07)',
        'NO_GROUP_MATCH: No group rule matches this row (region="DE", regulatoryClass=undefined) and there is no defaultGroup: refusing to guess where it may live',
        "MISSING_ROUTING_KEY: The row has no tenantId (got undefined): it is needed to choose the member",
        "INVALID_SELECTOR_CONFIG: groups[0].members[1].weight: must be > 0",
      ]);
    },
    // The scorecard's figures are deterministic: the README's worked example quotes them.
    "examples/scorecard.mjs": (scorecard, readme) => {
      expect(scorecard).toEqual(SCORECARD_OUTPUT);
      expect(readme).toContain(SCORECARD_OUTPUT.join("\n"));
    },
  },
});

const SCORECARD_OUTPUT = [
  "key                               distinct  top-1  imbalance (traffic / rows)  lost locality",
  "tenantId                               321  19.8%       2.48 / 1.20                 1.0%",
  "accountId                            15892   0.4%       1.11 / 1.07                22.7%",
  "tenantId, whale split by account       370   0.5%       1.21 / 1.17                 5.4%",
];
