"""Moving stores: export and import bundles, format migrations, salvage of damaged stores."""
