"""Example policy sets for ``compliance-strict``, in Cedar and in Rego, with the profile
variants that enable them. A package (not just a folder) so that its files ship as
package data and a profile can name them with ``resource_package``."""
